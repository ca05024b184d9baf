-- POST join-progress, round-robin over 64 members, a new step each time
-- (so every request appends an event).
local token = os.getenv("STRATUM_BENCH_TOKEN")
local n = 0
local thread_id = 0
local counter = 0
setup = function(thread)
  counter = counter + 1
  thread:set("thread_id", counter)
end
request = function()
  n = n + 1
  local member = "n-" .. (n % 64)
  local body = '{"step":"join/s' .. thread_id .. '-' .. n .. '"}'
  return wrk.format("POST", "/v1/admin/cluster/members/" .. member .. "/join-progress", {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
  }, body)
end
response = function(status, headers, body)
  if status ~= 200 then
    io.stderr:write("status " .. status .. ": " .. body .. "\n")
  end
end
