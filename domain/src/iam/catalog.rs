//! The action catalog: every action of the API and the resource type it
//! applies to. It is the vocabulary policies are written in, so it sits
//! below [`crate::policy`] and imports nothing of the domain.

string_enum! {
    /// What an action is performed on.
    pub enum ResourceType {
        Install = "install",
        Member = "member",
        Upgrade = "upgrade",
        Release = "release",
    }
}

/// Every action of the API, with the resource type it applies to.
/// Declares the actions and [`Action::ALL`] from one list, so `ALL` can
/// never leave one out.
macro_rules! actions {
    ($($variant:ident),* $(,)?) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Action {
            $($variant),*
        }

        impl Action {
            /// Every action, in declaration order.
            pub const ALL: [Action; [$(Action::$variant),*].len()] = [$(Action::$variant),*];
        }
    };
}

actions! {
    AdmitMember,
    ApproveNodeJoin,
    RequestJoin,
    ListJoinRequests,
    RejectNodeJoin,
    ReportJoinProgress,
    CompleteJoin,
    ReportJoinFailure,
    DecommissionMember,
    UpdateMember,
    ReportNodeFacts,
    ListAlarms,
    ListReplicas,
    FinalizeStorageVersion,
    ReportAppliedGeneration,
    ListMembers,
    GetMember,
    GetMembership,
    GetPeers,
    GetTransportAdmission,
    ReadEvents,
    AcknowledgeFork,
    RegisterRelease,
    ListReleases,
    GetRelease,
    SetRunningRelease,
    GetRunningRelease,
    CreateUpgrade,
    ListUpgrades,
    GetUpgrade,
    ApplyUpgrade,
    CancelUpgrade,
    RollbackUpgrade,
    AcknowledgeUpgrade,
    ReportNodeProgress,
    ReportBackup,
    CreateToken,
    ListTokens,
    RevokeToken,
    CreatePolicy,
    ListPolicies,
    GetPolicy,
    SetPrincipalPolicies,
    GetPrincipalPolicies,
    SetMemberPolicy,
    GetMemberPolicy,
    SetUpgradePolicy,
    GetUpgradePolicy,
}

impl Action {
    /// The action's name in policies, e.g. `cluster:ReportJoinFailure`.
    pub fn name(self) -> &'static str {
        match self {
            Action::AdmitMember => "cluster:AdmitMember",
            Action::ApproveNodeJoin => "cluster:ApproveNodeJoin",
            Action::RequestJoin => "cluster:RequestJoin",
            Action::ListJoinRequests => "cluster:ListJoinRequests",
            Action::RejectNodeJoin => "cluster:RejectNodeJoin",
            Action::ReportJoinProgress => "cluster:ReportJoinProgress",
            Action::CompleteJoin => "cluster:CompleteJoin",
            Action::ReportJoinFailure => "cluster:ReportJoinFailure",
            Action::DecommissionMember => "cluster:DecommissionMember",
            Action::UpdateMember => "cluster:UpdateMember",
            Action::ReportNodeFacts => "cluster:ReportNodeFacts",
            Action::ListAlarms => "cluster:ListAlarms",
            Action::ListReplicas => "cluster:ListReplicas",
            // Finalizing an upgrade of stratum itself is an administrator's
            // word: outside `cluster:*`, which ClusterOperator holds.
            Action::FinalizeStorageVersion => "system:FinalizeStorageVersion",
            Action::ReportAppliedGeneration => "cluster:ReportAppliedGeneration",
            Action::ListMembers => "cluster:ListMembers",
            Action::GetMember => "cluster:GetMember",
            Action::GetMembership => "cluster:GetMembership",
            Action::GetPeers => "cluster:GetPeers",
            Action::GetTransportAdmission => "cluster:GetTransportAdmission",
            Action::ReadEvents => "audit:ReadEvents",
            Action::AcknowledgeFork => "audit:AcknowledgeFork",
            Action::RegisterRelease => "release:RegisterRelease",
            Action::ListReleases => "release:ListReleases",
            Action::GetRelease => "release:GetRelease",
            Action::SetRunningRelease => "cluster:SetRunningRelease",
            Action::GetRunningRelease => "cluster:GetRunningRelease",
            Action::CreateUpgrade => "upgrade:CreateUpgrade",
            Action::ListUpgrades => "upgrade:ListUpgrades",
            Action::GetUpgrade => "upgrade:GetUpgrade",
            Action::ApplyUpgrade => "upgrade:ApplyUpgrade",
            Action::CancelUpgrade => "upgrade:CancelUpgrade",
            Action::RollbackUpgrade => "upgrade:RollbackUpgrade",
            Action::AcknowledgeUpgrade => "upgrade:AcknowledgeUpgrade",
            Action::ReportNodeProgress => "upgrade:ReportNodeProgress",
            Action::ReportBackup => "upgrade:ReportBackup",
            Action::CreateToken => "iam:CreateToken",
            Action::ListTokens => "iam:ListTokens",
            Action::RevokeToken => "iam:RevokeToken",
            Action::CreatePolicy => "iam:CreatePolicy",
            Action::ListPolicies => "iam:ListPolicies",
            Action::GetPolicy => "iam:GetPolicy",
            Action::SetPrincipalPolicies => "iam:SetPrincipalPolicies",
            Action::GetPrincipalPolicies => "iam:GetPrincipalPolicies",
            Action::SetMemberPolicy => "cluster:SetMemberPolicy",
            Action::GetMemberPolicy => "cluster:GetMemberPolicy",
            Action::SetUpgradePolicy => "upgrade:SetUpgradePolicy",
            Action::GetUpgradePolicy => "upgrade:GetUpgradePolicy",
        }
    }

    pub fn resource_type(self) -> ResourceType {
        match self {
            Action::ReportJoinProgress
            | Action::CompleteJoin
            | Action::ReportJoinFailure
            | Action::DecommissionMember
            | Action::UpdateMember
            | Action::ReportNodeFacts
            | Action::ReportAppliedGeneration
            | Action::GetMember
            | Action::GetTransportAdmission
            | Action::SetMemberPolicy
            | Action::GetMemberPolicy => ResourceType::Member,
            // The seed: cancel is install-scope.
            Action::GetUpgrade
            | Action::ApplyUpgrade
            | Action::RollbackUpgrade
            | Action::AcknowledgeUpgrade
            | Action::ReportNodeProgress
            | Action::ReportBackup
            | Action::SetUpgradePolicy
            | Action::GetUpgradePolicy => ResourceType::Upgrade,
            Action::GetRelease => ResourceType::Release,
            // Every action left is install-wide. Named one by one, so a new
            // action is a compile error until its scope is decided, never
            // a quiet install scope that member-scoped Deny statements miss.
            Action::AdmitMember
            | Action::ApproveNodeJoin
            | Action::RequestJoin
            | Action::ListJoinRequests
            | Action::RejectNodeJoin
            | Action::ListAlarms
            | Action::ListReplicas
            | Action::FinalizeStorageVersion
            | Action::ListMembers
            | Action::GetMembership
            | Action::GetPeers
            | Action::ReadEvents
            | Action::AcknowledgeFork
            | Action::RegisterRelease
            | Action::ListReleases
            | Action::SetRunningRelease
            | Action::GetRunningRelease
            | Action::CreateUpgrade
            | Action::ListUpgrades
            | Action::CancelUpgrade
            | Action::CreateToken
            | Action::ListTokens
            | Action::RevokeToken
            | Action::CreatePolicy
            | Action::ListPolicies
            | Action::GetPolicy
            | Action::SetPrincipalPolicies
            | Action::GetPrincipalPolicies => ResourceType::Install,
        }
    }

    /// The resource a request acts on, from its path parameters (`nodeId`,
    /// `id`, `version`), for policies and `ACCESS_DENIED` details: e.g.
    /// `stratum:member/n-1`, `stratum:upgrade/upg-…`, a node's own part of
    /// an upgrade `stratum:upgrade/upg-…/node/n-1`, or `stratum:install`.
    pub fn resource<'a>(self, param: impl Fn(&str) -> Option<&'a str>) -> String {
        match self.resource_type() {
            ResourceType::Member => match param("nodeId") {
                Some(n) => format!("stratum:member/{n}"),
                None => "stratum:install".to_owned(),
            },
            ResourceType::Upgrade => match (param("id"), param("nodeId")) {
                (Some(u), Some(n)) => format!("stratum:upgrade/{u}/node/{n}"),
                (Some(u), None) => format!("stratum:upgrade/{u}"),
                _ => "stratum:install".to_owned(),
            },
            ResourceType::Release => match param("version") {
                Some(v) => format!("stratum:release/{v}"),
                None => "stratum:install".to_owned(),
            },
            ResourceType::Install => "stratum:install".to_owned(),
        }
    }

    /// The key of the resource policy that applies to a request on this
    /// action (`member/<nodeId>`, `upgrade/<id>`), if any.
    pub fn resource_policy_key<'a>(
        self,
        param: impl Fn(&str) -> Option<&'a str>,
    ) -> Option<String> {
        match self.resource_type() {
            ResourceType::Member => param("nodeId").map(|n| format!("member/{n}")),
            ResourceType::Upgrade => param("id").map(|u| format!("upgrade/{u}")),
            ResourceType::Release | ResourceType::Install => None,
        }
    }
}
