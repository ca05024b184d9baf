-- GET a member and GET the peers, alternating, with a bearer token.
local token = os.getenv("STRATUM_BENCH_TOKEN")
local n = 0
request = function()
  n = n + 1
  local path
  if n % 2 == 0 then
    path = "/v1/admin/cluster/members/n-" .. (n % 64)
  else
    path = "/v1/admin/cluster/peers"
  end
  return wrk.format("GET", path, { ["Authorization"] = "Bearer " .. token })
end
