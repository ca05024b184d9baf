# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_stratum_global_optspecs
    string join \n log-level= log-format= server= token-file= ca-cert= client-cert= client-key= o/output= config= h/help V/version
end

function __fish_stratum_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_stratum_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_stratum_using_subcommand
    set -l cmd (__fish_stratum_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c stratum -n "__fish_stratum_needs_command" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_needs_command" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_needs_command" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_needs_command" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_needs_command" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_needs_command" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_needs_command" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_needs_command" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_needs_command" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_needs_command" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_needs_command" -s V -l version -d 'Print version'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "serve" -d 'Runs the HTTP API'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "members" -d 'Members of the cluster (needs `--server`)'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "peers" -d 'The six peer lists at the current generation (needs `--server`)'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "membership" -d 'The membership generation, digest and counts (needs `--server`)'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "upgrades" -d 'Upgrades (needs `--server`)'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "releases" -d 'Releases: list and register them on a server, or import one from install media on the host'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "replicas" -d 'The replicas on the server\'s database: each `stratum serve`, its build, formats, settings and heartbeat (needs `--server`)'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "alarms" -d 'The alarms (needs `--server`)'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "token" -d 'API tokens: through a server with `--server`, or on the host with direct access to the database (e.g. to recover access)'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "tokens" -d 'API tokens: through a server with `--server`, or on the host with direct access to the database (e.g. to recover access)'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "events" -d 'The event log: verify, export and import on the host; list, tail and export through a server'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "replay" -d 'Folds the read models again from the log with this build\'s projections: checks them against the stored ones, rebuilds them, prints the membership digest at a position, writes them out entity by entity, or shows what differs from another build\'s'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "log" -d 'The log as a transparency log: make a checkpoint signing key, and watch a server\'s checkpoints as an auditor\'s witness'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "witness" -d 'Be a witness of transparency logs (C2SP tlog-witness): make a witness key, and serve the witness'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "completions" -d 'Prints a shell completion script: `stratum completions bash > /etc/bash_completion.d/stratum`'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "man" -d 'Prints the man page (roff): `stratum man > stratum.1`'
complete -c stratum -n "__fish_stratum_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l listen -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l metrics-listen -d 'Where Prometheus scrapes `GET /metrics` (no token; bind it to the monitoring network). Off unless set' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l bootstrap-token -d 'The first start\'s token for `user/admin` (32 characters at least); without it a random one is generated and printed once' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l rebuild-rows-per-second -d 'At most this many read-model rows a second are written again when the database\'s rows were made by projections of other versions than this build\'s (after an upgrade whose release changed a fold)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l tls-cert -d 'A PEM file with the server\'s certificate chain: with `--tls-key`, the API is served as HTTPS. Reloaded on SIGHUP' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l tls-key -d 'The PEM file with the private key of `--tls-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l client-ca -d 'A PEM file of CA certificates: a client certificate they signed that names `node/<id>` authenticates as that node, with `NodeAgent`, without a bearer token. Needs `--tls-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l release-keys -d 'Trusted release keys, `keyId=base64-public-key`, comma-separated' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l release-keys-file -d 'A file of trusted release keys, one `keyId=base64-public-key` a line, `#` comments' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l openbao-addr -d 'OpenBao\'s address, e.g. `https://10.0.0.1:8200`: its raft is cleaned over its HTTP API. Unset: record-only' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l openbao-token -d 'The token for OpenBao\'s remove-peer call (needs `sys/storage/raft/remove-peer`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l openbao-cacert -d 'A PEM file with the CA that signed OpenBao\'s certificate' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l raft-ovn -d 'How OVN\'s rafts are cleaned: `kick` (the built-in `cluster/kick` on both databases), `commands`, or `record-only`. Default: `commands` when STRATUM_RAFT_OVN_COMMANDS is set, else `record-only`' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l raft-ovn-commands -d 'With `commands`: a JSON array of argument vectors with `{nodeId}`, `{address}` and `{host}` placeholders' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l ovs-appctl -d 'With `kick`: the program (default `ovs-appctl`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l ovn-nb-ctl -d 'With `kick`: the Northbound database\'s control socket (default `/var/run/ovn/ovnnb_db.ctl`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l ovn-sb-ctl -d 'With `kick`: the Southbound database\'s control socket (default `/var/run/ovn/ovnsb_db.ctl`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l ovn-nb-server -d 'With `kick`: how the Northbound raft names a server (default `ssl:{host}:6643`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l ovn-sb-server -d 'With `kick`: how the Southbound raft names a server (default `ssl:{host}:6644`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l raft-patroni -d 'How Patroni\'s raft is cleaned: `syncobj` (the built-in `syncobj_admin -remove`), `commands`, or `record-only`. Default: `commands` when STRATUM_RAFT_PATRONI_COMMANDS is set, else `record-only`' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l raft-patroni-commands -d 'With `commands`: a JSON array of argument vectors with placeholders (for an etcd DCS, the command that deletes the member\'s key)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l patroni-syncobj-admin -d 'With `syncobj`: the program (default `syncobj_admin`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l patroni-raft-conn -d 'With `syncobj`: the raft members to talk to, `host:port` separated by commas (Patroni\'s `raft.self_addr` of the control nodes; default `127.0.0.1:5010`). The first that answers and is not the member being removed is asked' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l patroni-raft-port -d 'With `syncobj`: the raft port of the member to remove (default 5010)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l raft-timeout -d 'The longest one call to a raft may take (an HTTP request, a run of `ovs-appctl` or `syncobj_admin`, whose process is then killed), and the longest a removal waits for the raft\'s own listing to stop naming the peer; past it the removal is retried' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l raft-recheck -d 'How often each raft whose adapter reads a listing (OpenBao, OVN\'s `kick`, Patroni\'s `syncobj`) is read for members whose removal is recorded but whom it names again; soon again after an election' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l raft-retry-min -d 'The first wait before a failed removal is tried again, e.g. `1s`; it doubles on each failure' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l raft-retry-max -d 'The longest wait between tries' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l upgrade-settle -d 'How long the cluster settles after a node\'s restart before the next node\'s turn or the end, e.g. `60s`' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l backup-target -d 'Where upgrade backups go when one is configured, e.g. `s3://backups/stratum`; without it backups stay on the node' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l backup-recipient -d 'The recipient backups to the target are encrypted to (an age or PGP recipient)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l listen-backlog -d 'Connections the kernel queues before they are accepted (the kernel caps it at `net.core.somaxconn`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l max-connections -d 'Open connections at most. At the limit, the connection idle longest is closed to admit a new one. It is lowered to what the process\'s open-file limit allows' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l header-read-timeout -d 'How long a client may take to send a request\'s line and headers, from its first byte' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l idle-timeout -d 'How long a connection may stay open between requests' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l request-timeout -d 'How long a request may take, its body included; long-polls get their wait on top, event streams are bounded by the watcher limit' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l max-watchers -d 'Event streams and long-polls open at once, at most; beyond it a watcher is answered 503 with `Retry-After`' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l shutdown-grace -d 'How long a stop waits for requests in flight after it ended the event streams and long-polls' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l log-signing-key-file -d 'A Go note private key file (`PRIVATE+KEY+<name>+<hash>+<base64>`, as `stratum log keygen` writes it): checkpoints are signed with it. Without it tiles and proofs are served and checkpoints are not' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l log-origin -d 'The checkpoints\' origin line (no spaces, no `+`); by default the key\'s name' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l log-state-file -d 'Where the newest signed checkpoint is remembered outside the database; by default beside the key, `<key file>.checkpoint`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l log-public -d 'Serves `GET /v1/log/...` (checkpoint, tiles, consistency proofs) without a token, for outside witnesses and monitors. The leaves are hashes: this shows how many events there are and when they came' -r -f -a "true\t''
false\t''"
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l log-witness-policy -d 'A witness policy (`witness NAME VKEY URL` lines and `quorum K`): each checkpoint signed is submitted to these witnesses (C2SP tlog-witness), and `/v1/log/checkpoint` serves their cosignatures' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand serve" -l print-config -d 'Prints the settings in effect (secrets redacted), as a `--config` file, and exits'
complete -c stratum -n "__fish_stratum_using_subcommand serve" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -f -a "list" -d 'Lists the members, filtered'
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -f -a "get" -d 'Shows one member'
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -f -a "update" -d 'Changes a member\'s role, address, bindings or labels'
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -f -a "join-failed" -d 'Records that a node\'s join failed, at a step, with the last error'
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -f -a "decommission" -d 'Decommissions a member, recording why'
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -f -a "history" -d 'A member\'s events, oldest first'
complete -c stratum -n "__fish_stratum_using_subcommand members; and not __fish_seen_subcommand_from list get update join-failed decommission history help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l state -d 'joining, active, failed, removing or decommissioned' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l role -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l rack -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l as-of -d 'Read as of this log position (`asOf`), or as of an RFC 3339 time (the last event at or before it)' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -l as-of -d 'Read as of this log position (`asOf`), or as of an RFC 3339 time (the last event at or before it)' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l role -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l mgmt-ip -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l label -d '`key=value`; repeat for more. Replaces every label' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l binding -d '`class=address`; repeat for more. Replaces every binding' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l if-match -d 'Change it only if it is still at this version (its ETag)' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -l force -d 'Demote one of the last two active voters'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from update" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -l step -d 'The join step that failed, e.g. `join/raft-openbao`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -l error -d 'The last error line' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from join-failed" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -l reason -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -l force -d 'Even when fewer than two active voters would remain'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from decommission" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from history" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from history" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from history" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from history" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from history" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from history" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from history" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from history" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from history" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from history" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from help" -f -a "list" -d 'Lists the members, filtered'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from help" -f -a "get" -d 'Shows one member'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from help" -f -a "update" -d 'Changes a member\'s role, address, bindings or labels'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from help" -f -a "join-failed" -d 'Records that a node\'s join failed, at a step, with the last error'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from help" -f -a "decommission" -d 'Decommissions a member, recording why'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from help" -f -a "history" -d 'A member\'s events, oldest first'
complete -c stratum -n "__fish_stratum_using_subcommand members; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand peers" -l as-of -d 'Read as of this log position (`asOf`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand peers" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand peers" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand peers" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand peers" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand peers" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand peers" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand peers" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand peers" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand peers" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand peers" -l watch -d 'Keep printing the lists each time the generation moves'
complete -c stratum -n "__fish_stratum_using_subcommand peers" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand membership" -l as-of -d 'Read as of this log position (`asOf`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand membership" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand membership" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand membership" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand membership" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand membership" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand membership" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand membership" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand membership" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand membership" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand membership" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -f -a "list" -d 'Lists the upgrades, in the order they were planned'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -f -a "get" -d 'Shows one upgrade, node by node'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -f -a "create" -d 'Plans an upgrade to a registered release'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -f -a "apply" -d 'Applies a staged upgrade'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -f -a "cancel" -d 'Cancels an upgrade'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -f -a "rollback" -d 'Rolls a done or failed upgrade back'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -f -a "acknowledge" -d 'Acknowledges a failed upgrade, clearing the write freeze'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and not __fish_seen_subcommand_from list get create apply cancel rollback acknowledge help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -l as-of -d 'Read as of this log position (`asOf`), or as of an RFC 3339 time (the last event at or before it)' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -l as-of -d 'Read as of this log position (`asOf`), or as of an RFC 3339 time (the last event at or before it)' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l target-release -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l mode -d '`now` (default) or `stage-only`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l backup -d 'Where the pre-upgrade backup goes: `node` or `target`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from apply" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from apply" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from apply" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from apply" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from apply" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from apply" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from apply" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from apply" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from apply" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from apply" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from cancel" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from cancel" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from cancel" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from cancel" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from cancel" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from cancel" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from cancel" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from cancel" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from cancel" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from cancel" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -l restore-backup -d 'Restore its pre-upgrade backup first'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from rollback" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from acknowledge" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from acknowledge" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from acknowledge" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from acknowledge" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from acknowledge" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from acknowledge" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from acknowledge" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from acknowledge" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from acknowledge" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from acknowledge" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from help" -f -a "list" -d 'Lists the upgrades, in the order they were planned'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from help" -f -a "get" -d 'Shows one upgrade, node by node'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from help" -f -a "create" -d 'Plans an upgrade to a registered release'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from help" -f -a "apply" -d 'Applies a staged upgrade'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from help" -f -a "cancel" -d 'Cancels an upgrade'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from help" -f -a "rollback" -d 'Rolls a done or failed upgrade back'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from help" -f -a "acknowledge" -d 'Acknowledges a failed upgrade, clearing the write freeze'
complete -c stratum -n "__fish_stratum_using_subcommand upgrades; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -f -a "import" -d 'Registers a release manifest loaded from install media (its `sourceKind` is `media`), on the host; the signature is checked against the trusted release keys like any registration'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -f -a "list" -d 'Lists the registered releases (needs `--server`)'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -f -a "register" -d 'Registers a signed release manifest through a server'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and not __fish_seen_subcommand_from import list register help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l file -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l release-keys -d 'Trusted release keys, `keyId=base64-public-key`, comma-separated' -r
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l release-keys-file -d 'A file of trusted release keys, one `keyId=base64-public-key` a line, `#` comments' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from import" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from list" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from list" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from list" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from list" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from list" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from list" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from list" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from list" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from list" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -l file -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from register" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from help" -f -a "import" -d 'Registers a release manifest loaded from install media (its `sourceKind` is `media`), on the host; the signature is checked against the trusted release keys like any registration'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from help" -f -a "list" -d 'Lists the registered releases (needs `--server`)'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from help" -f -a "register" -d 'Registers a signed release manifest through a server'
complete -c stratum -n "__fish_stratum_using_subcommand releases; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -f -a "list" -d 'Lists every replica registered on the database: live, silent (no heartbeat for 15 s) or stopped; the log\'s storage level; the agreed process-manager settings and the replicas whose settings differ'
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -f -a "finalize" -d 'Finalizes an upgrade of stratum itself: the log moves to the newest storage level of the build answering, and its settings become the agreed ones. Refused, naming them, while a live replica cannot read the level or has other settings. Until it, the previous build can be started again on the database; after it, it refuses it'
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and not __fish_seen_subcommand_from list finalize help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from list" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from list" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from list" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from list" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from list" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from list" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from list" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from list" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from list" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -l level -d 'The level to finalize (the answering build\'s newest by default)' -r
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from finalize" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from help" -f -a "list" -d 'Lists every replica registered on the database: live, silent (no heartbeat for 15 s) or stopped; the log\'s storage level; the agreed process-manager settings and the replicas whose settings differ'
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from help" -f -a "finalize" -d 'Finalizes an upgrade of stratum itself: the log moves to the newest storage level of the build answering, and its settings become the agreed ones. Refused, naming them, while a live replica cannot read the level or has other settings. Until it, the previous build can be started again on the database; after it, it refuses it'
complete -c stratum -n "__fish_stratum_using_subcommand replicas; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -l as-of -d 'Read as of this log position (`asOf`)' -r
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -l active -d 'Only the alarms not cleared'
complete -c stratum -n "__fish_stratum_using_subcommand alarms" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -f -a "create" -d 'Creates a token and prints it, with its secret, once'
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -f -a "list" -d 'Lists the tokens (never their secrets), one JSON object a line'
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -f -a "revoke" -d 'Revokes a token: it stops working on the next request'
complete -c stratum -n "__fish_stratum_using_subcommand token; and not __fish_seen_subcommand_from create list revoke help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l principal -d '`user/<name>`, `node/<nodeId>` or `stratum-installer`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l policy -d 'A managed or custom policy name (repeat for more)' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l expires-at -d 'RFC 3339: when the token stops working' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from revoke" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from help" -f -a "create" -d 'Creates a token and prints it, with its secret, once'
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from help" -f -a "list" -d 'Lists the tokens (never their secrets), one JSON object a line'
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from help" -f -a "revoke" -d 'Revokes a token: it stops working on the next request'
complete -c stratum -n "__fish_stratum_using_subcommand token; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -f -a "create" -d 'Creates a token and prints it, with its secret, once'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -f -a "list" -d 'Lists the tokens (never their secrets), one JSON object a line'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -f -a "revoke" -d 'Revokes a token: it stops working on the next request'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and not __fish_seen_subcommand_from create list revoke help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l principal -d '`user/<name>`, `node/<nodeId>` or `stratum-installer`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l policy -d 'A managed or custom policy name (repeat for more)' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l expires-at -d 'RFC 3339: when the token stops working' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from revoke" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from help" -f -a "create" -d 'Creates a token and prints it, with its secret, once'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from help" -f -a "list" -d 'Lists the tokens (never their secrets), one JSON object a line'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from help" -f -a "revoke" -d 'Revokes a token: it stops working on the next request'
complete -c stratum -n "__fish_stratum_using_subcommand tokens; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -f -a "verify" -d 'Recomputes the hash chain; exits 1 naming the first bad position. With `--file`, checks an export offline, without any database'
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -f -a "import" -d 'Loads an export into an empty database, keeping positions and hashes, then builds the read models from it'
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -f -a "export" -d 'Writes the log as JSON lines, payloads decoded, to standard output; with `--server`, the same lines from a running server'
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -f -a "list" -d 'Lists events from a server, oldest first, filtered'
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -f -a "tail" -d 'Follows a server\'s event stream (Server-Sent Events), reconnecting from the last event seen'
complete -c stratum -n "__fish_stratum_using_subcommand events; and not __fish_seen_subcommand_from verify import export list tail help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l file -d 'An export (`stratum events export`) to check instead of the database' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l expect-head -d 'A head written down earlier, as `POSITION:HASH` (what a previous verify printed): the log must still reach it with that hash, so a cut tail or a log rewritten from the start is caught' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l key -d 'With --file: the log\'s note verifier key (a file or the key itself, `<name>+<hash>+<base64>`): the export must end with a checkpoint signed by it, of the export\'s size and its events\' Merkle root' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l checkpoint -d 'With --key: a signed checkpoint kept earlier (`stratum log watch`\'s state): the export must reach its size with its root, so a log cut back or rewritten since is caught' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l witness-policy -d 'With --checkpoint: a witness policy (`witness NAME VKEY [URL]` lines, `quorum K`); the checkpoint kept must carry a quorum of its witnesses\' valid cosignatures' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -l allow-empty -d 'Accept a log or export with no events (a new installation\'s); without it an empty one exits 1, as it proves nothing'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from verify" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -l file -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from import" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l after -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l until -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from export" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l after -d 'Only events after this position' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l limit -d 'At most this many events' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l stream -d 'Only this stream, e.g. `member/n-1`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l type -d 'Only this event type, e.g. `MemberDecommissioned`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l actor -d 'Only events of this principal, e.g. `user/alice`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -l after -d 'Start after this position (default: the head, only new events)' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from tail" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from help" -f -a "verify" -d 'Recomputes the hash chain; exits 1 naming the first bad position. With `--file`, checks an export offline, without any database'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from help" -f -a "import" -d 'Loads an export into an empty database, keeping positions and hashes, then builds the read models from it'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from help" -f -a "export" -d 'Writes the log as JSON lines, payloads decoded, to standard output; with `--server`, the same lines from a running server'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from help" -f -a "list" -d 'Lists events from a server, oldest first, filtered'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from help" -f -a "tail" -d 'Follows a server\'s event stream (Server-Sent Events), reconnecting from the last event seen'
complete -c stratum -n "__fish_stratum_using_subcommand events; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l dump -d 'Writes every read model, one entity per line (canonical JSON, stable order), to FILE (`-`: standard output): what another build compares with `--diff --against FILE`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l against -d 'With --diff: compares with a dump written by `replay --dump` instead of the database\'s read models' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l until -d 'With --digest, --dump or --diff: folds only up to this position' -r
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l file -d 'With --digest, --dump or --diff: folds an export instead of the database\'s log' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l database-url -d '`sqlite://stratum.db` (created if missing) or `postgres://...`' -r
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replay" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l check -d 'Compares a rebuild with the stored read models; exits 1 on drift'
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l rebuild -d 'Rebuilds every read model from position 0'
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l digest -d 'Prints the digest of the membership read model (what the API\'s `GET /v1/admin/cluster/membership?asOf=P` answers)'
complete -c stratum -n "__fish_stratum_using_subcommand replay" -l diff -d 'Shows what this build\'s projections make of the log that differs, entity by entity and field by field, from the database\'s read models (or from a dump, --against); exits 1 when anything does'
complete -c stratum -n "__fish_stratum_using_subcommand replay" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -f -a "keygen" -d 'Writes a checkpoint signing key pair in Go\'s note format: `NAME.key` (the private key, for STRATUM_LOG_SIGNING_KEY_FILE; mode 0600) and `NAME.pub` (the verifier key, for auditors)'
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -f -a "watch" -d 'The auditor\'s witness (needs `--server`): fetches the checkpoint, checks its signature, that it is not smaller than the one kept, and that it extends it (a consistency proof); keeps it. Exits 1 naming what broke: a bad signature, a shrink, a fork'
complete -c stratum -n "__fish_stratum_using_subcommand log; and not __fish_seen_subcommand_from keygen watch help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -l dir -d 'Where to write the two files' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from keygen" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l key -d 'The log\'s note verifier key: a file, or the key itself' -r
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l state -d 'Where the newest verified checkpoint is kept between runs' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l witness-policy -d 'A witness policy (`witness NAME VKEY [URL]` lines, `quorum K`): a checkpoint without a quorum of valid cosignatures is refused, naming the witnesses that signed and those that did not' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from watch" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from help" -f -a "keygen" -d 'Writes a checkpoint signing key pair in Go\'s note format: `NAME.key` (the private key, for STRATUM_LOG_SIGNING_KEY_FILE; mode 0600) and `NAME.pub` (the verifier key, for auditors)'
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from help" -f -a "watch" -d 'The auditor\'s witness (needs `--server`): fetches the checkpoint, checks its signature, that it is not smaller than the one kept, and that it extends it (a consistency proof); keeps it. Exits 1 naming what broke: a bad signature, a shrink, a fork'
complete -c stratum -n "__fish_stratum_using_subcommand log; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -f -a "keygen" -d 'Writes a witness key pair: `NAME.key` (the private key; mode 0600) and `NAME.pub` (its cosignature/v1 verifier key, type 0x04), with any `/` in NAME written as `_` in the file names'
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -f -a "serve" -d 'Serves C2SP tlog-witness (`POST /add-checkpoint`, `GET /<origin hash>/checkpoint`) for the logs it is given: cosigns a checkpoint only if it is consistent with the newest it cosigned'
complete -c stratum -n "__fish_stratum_using_subcommand witness; and not __fish_seen_subcommand_from keygen serve help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -l dir -d 'Where to write the two files' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from keygen" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l listen -d 'The address to listen on, e.g. `127.0.0.1:7380`' -r
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l key -d 'The witness\'s private key (`stratum witness keygen`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l state -d 'Where the newest checkpoint cosigned for each log is kept' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l log-key -d 'A log\'s note verifier key (a file or the key itself); its name is the log\'s origin. Repeat it for each log witnessed' -r
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from serve" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from help" -f -a "keygen" -d 'Writes a witness key pair: `NAME.key` (the private key; mode 0600) and `NAME.pub` (its cosignature/v1 verifier key, type 0x04), with any `/` in NAME written as `_` in the file names'
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from help" -f -a "serve" -d 'Serves C2SP tlog-witness (`POST /add-checkpoint`, `GET /<origin hash>/checkpoint`) for the logs it is given: cosigns a checkpoint only if it is consistent with the newest it cosigned'
complete -c stratum -n "__fish_stratum_using_subcommand witness; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand completions" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand completions" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand completions" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand completions" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand completions" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand completions" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand completions" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand completions" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand completions" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand completions" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand man" -l log-level -d 'What is logged: a level (`info`, `debug`...) or `tracing` directives such as `info,stratum_api=debug`' -r
complete -c stratum -n "__fish_stratum_using_subcommand man" -l log-format -d '`text` (coloured only on a terminal) or `json` (one object per line)' -r -f -a "text\t''
json\t''"
complete -c stratum -n "__fish_stratum_using_subcommand man" -l server -d 'A running server, e.g. `https://stratum.example:8443`: the command talks to it instead of opening the database. The token is read from `STRATUM_TOKEN` or `--token-file`' -r
complete -c stratum -n "__fish_stratum_using_subcommand man" -l token-file -d 'A file holding the bearer token (instead of `STRATUM_TOKEN`)' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand man" -l ca-cert -d 'PEM CA certificates to trust for the server\'s certificate, on top of none: give the CA that signed it' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand man" -l client-cert -d 'A PEM client certificate (a node agent\'s), with `--client-key`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand man" -l client-key -d 'The PEM key of `--client-cert`' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand man" -s o -l output -d 'How answers print: `table`, `json` or `yaml`' -r -f -a "table\t''
json\t''
yaml\t''"
complete -c stratum -n "__fish_stratum_using_subcommand man" -l config -d 'A TOML file of settings: each key is a flag\'s name (`listen`, `database-url`...). A flag wins over its environment variable, which wins over the file, which wins over the default' -r -F
complete -c stratum -n "__fish_stratum_using_subcommand man" -s h -l help -d 'Print help'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "serve" -d 'Runs the HTTP API'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "members" -d 'Members of the cluster (needs `--server`)'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "peers" -d 'The six peer lists at the current generation (needs `--server`)'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "membership" -d 'The membership generation, digest and counts (needs `--server`)'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "upgrades" -d 'Upgrades (needs `--server`)'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "releases" -d 'Releases: list and register them on a server, or import one from install media on the host'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "replicas" -d 'The replicas on the server\'s database: each `stratum serve`, its build, formats, settings and heartbeat (needs `--server`)'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "alarms" -d 'The alarms (needs `--server`)'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "token" -d 'API tokens: through a server with `--server`, or on the host with direct access to the database (e.g. to recover access)'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "events" -d 'The event log: verify, export and import on the host; list, tail and export through a server'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "replay" -d 'Folds the read models again from the log with this build\'s projections: checks them against the stored ones, rebuilds them, prints the membership digest at a position, writes them out entity by entity, or shows what differs from another build\'s'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "log" -d 'The log as a transparency log: make a checkpoint signing key, and watch a server\'s checkpoints as an auditor\'s witness'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "witness" -d 'Be a witness of transparency logs (C2SP tlog-witness): make a witness key, and serve the witness'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "completions" -d 'Prints a shell completion script: `stratum completions bash > /etc/bash_completion.d/stratum`'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "man" -d 'Prints the man page (roff): `stratum man > stratum.1`'
complete -c stratum -n "__fish_stratum_using_subcommand help; and not __fish_seen_subcommand_from serve members peers membership upgrades releases replicas alarms token events replay log witness completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from members" -f -a "list" -d 'Lists the members, filtered'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from members" -f -a "get" -d 'Shows one member'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from members" -f -a "update" -d 'Changes a member\'s role, address, bindings or labels'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from members" -f -a "join-failed" -d 'Records that a node\'s join failed, at a step, with the last error'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from members" -f -a "decommission" -d 'Decommissions a member, recording why'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from members" -f -a "history" -d 'A member\'s events, oldest first'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from upgrades" -f -a "list" -d 'Lists the upgrades, in the order they were planned'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from upgrades" -f -a "get" -d 'Shows one upgrade, node by node'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from upgrades" -f -a "create" -d 'Plans an upgrade to a registered release'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from upgrades" -f -a "apply" -d 'Applies a staged upgrade'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from upgrades" -f -a "cancel" -d 'Cancels an upgrade'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from upgrades" -f -a "rollback" -d 'Rolls a done or failed upgrade back'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from upgrades" -f -a "acknowledge" -d 'Acknowledges a failed upgrade, clearing the write freeze'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from releases" -f -a "import" -d 'Registers a release manifest loaded from install media (its `sourceKind` is `media`), on the host; the signature is checked against the trusted release keys like any registration'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from releases" -f -a "list" -d 'Lists the registered releases (needs `--server`)'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from releases" -f -a "register" -d 'Registers a signed release manifest through a server'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from replicas" -f -a "list" -d 'Lists every replica registered on the database: live, silent (no heartbeat for 15 s) or stopped; the log\'s storage level; the agreed process-manager settings and the replicas whose settings differ'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from replicas" -f -a "finalize" -d 'Finalizes an upgrade of stratum itself: the log moves to the newest storage level of the build answering, and its settings become the agreed ones. Refused, naming them, while a live replica cannot read the level or has other settings. Until it, the previous build can be started again on the database; after it, it refuses it'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from token" -f -a "create" -d 'Creates a token and prints it, with its secret, once'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from token" -f -a "list" -d 'Lists the tokens (never their secrets), one JSON object a line'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from token" -f -a "revoke" -d 'Revokes a token: it stops working on the next request'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from events" -f -a "verify" -d 'Recomputes the hash chain; exits 1 naming the first bad position. With `--file`, checks an export offline, without any database'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from events" -f -a "import" -d 'Loads an export into an empty database, keeping positions and hashes, then builds the read models from it'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from events" -f -a "export" -d 'Writes the log as JSON lines, payloads decoded, to standard output; with `--server`, the same lines from a running server'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from events" -f -a "list" -d 'Lists events from a server, oldest first, filtered'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from events" -f -a "tail" -d 'Follows a server\'s event stream (Server-Sent Events), reconnecting from the last event seen'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from log" -f -a "keygen" -d 'Writes a checkpoint signing key pair in Go\'s note format: `NAME.key` (the private key, for STRATUM_LOG_SIGNING_KEY_FILE; mode 0600) and `NAME.pub` (the verifier key, for auditors)'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from log" -f -a "watch" -d 'The auditor\'s witness (needs `--server`): fetches the checkpoint, checks its signature, that it is not smaller than the one kept, and that it extends it (a consistency proof); keeps it. Exits 1 naming what broke: a bad signature, a shrink, a fork'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from witness" -f -a "keygen" -d 'Writes a witness key pair: `NAME.key` (the private key; mode 0600) and `NAME.pub` (its cosignature/v1 verifier key, type 0x04), with any `/` in NAME written as `_` in the file names'
complete -c stratum -n "__fish_stratum_using_subcommand help; and __fish_seen_subcommand_from witness" -f -a "serve" -d 'Serves C2SP tlog-witness (`POST /add-checkpoint`, `GET /<origin hash>/checkpoint`) for the logs it is given: cosigns a checkpoint only if it is consistent with the newest it cosigned'
