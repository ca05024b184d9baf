"""A client generated from the served OpenAPI document drives the API.

Usage: client_scenario.py BASE_URL TOKEN CLIENT_DIR

CLIENT_DIR holds the package `openapi-python-client` generated (as
`client`), used as generated: nothing is patched. The scenario is what an
operator and a node agent do: admit members, report join progress, report
a failed join and wait for its raft cleanup, decommission a member with a
reason, and read the transport refusal of each.
"""

import sys
import time

base_url, token, client_dir = sys.argv[1:4]
sys.path.insert(0, client_dir)

from client import AuthenticatedClient  # noqa: E402
from client.api.membership import (  # noqa: E402
    admission,
    admit,
    decommission,
    get_member,
    join_complete,
    join_failed,
    join_progress,
)
from client.models import (  # noqa: E402
    AdmitBody,
    AdmitBodyLabelsType0,
    AdmitBodyRole,
    DecommissionBody,
    Error,
    JoinFailedBody,
    JoinProgressBody,
    MemberRecord,
)

api = AuthenticatedClient(base_url=base_url, token=token)


def ok(answer, what):
    if answer is None or isinstance(answer, Error):
        raise SystemExit(f"{what}: {answer!r}")
    return answer


def until(what, probe, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


labels = AdmitBodyLabelsType0.from_dict({"topology.rack": "r1"})
for i, node in enumerate(["n-1", "n-2", "n-3", "n-4"], start=1):
    m = ok(
        admit.sync(
            client=api,
            body=AdmitBody(
                node_id=node,
                role=AdmitBodyRole.HYBRID,
                mgmt_ip=f"192.0.2.{10 + i}",
                labels=labels,
            ),
        ),
        f"admit {node}",
    )
    assert isinstance(m, MemberRecord) and m.state == "joining", m
for node in ["n-1", "n-2", "n-4"]:
    m = ok(join_complete.sync(node_id=node, client=api), f"join-complete {node}")
    assert m.state == "active", m

# n-3's join reaches OpenBao's raft, then fails at OVN's.
ok(join_progress.sync(node_id="n-3", client=api, body=JoinProgressBody(step="join/raft-openbao")), "join-progress")
failed = ok(
    join_failed.sync(
        node_id="n-3",
        client=api,
        body=JoinFailedBody(step="join/raft-ovn", error="ovsdb-server: connection refused"),
    ),
    "join-failed",
)
assert failed.state == "failed" and failed.failed_step == "join/raft-ovn", failed
cleaned = until(
    "n-3's raft cleanup",
    lambda: (lambda m: m if isinstance(m, MemberRecord) and m.raft_cleanup_at else None)(
        get_member.sync(node_id="n-3", client=api)
    ),
)
print(f"n-3 taken out of its rafts at {cleaned.raft_cleanup_at}")

reason = "motherboard replaced under RMA 7731"
removing = ok(
    decommission.sync(node_id="n-4", client=api, body=DecommissionBody(reason=reason)),
    "decommission",
)
assert removing.state in ("removing", "decommissioned"), removing
gone = until(
    "n-4 decommissioned",
    lambda: (lambda m: m if isinstance(m, MemberRecord) and m.state == "decommissioned" else None)(
        get_member.sync(node_id="n-4", client=api)
    ),
)
assert gone.decommission_reason == reason and gone.decommissioned_by == "user/admin", gone

refused = ok(admission.sync(node_id="n-4", client=api), "transport admission")
assert refused.admitted is False, refused
assert refused.refusal.reason == reason, refused.refusal
assert refused.refusal.revoked_by == "user/admin", refused.refusal
failed_peer = ok(admission.sync(node_id="n-3", client=api), "transport admission of n-3")
assert failed_peer.admitted is False and "join failed at join/raft-ovn" in failed_peer.refusal.reason
unknown = ok(admission.sync(node_id="n-404", client=api), "transport admission of n-404")
assert unknown.admitted is False, unknown
print("generated client scenario passed")
