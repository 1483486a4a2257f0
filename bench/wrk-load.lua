-- wrk's script for the bench's load (bench/load-process.ts): GET the URL as it is, or, given a file of
-- signed bodies (one "signature<TAB>body" a line), POST them in turn as push deliveries, each with a
-- delivery id of its own. Prints one JSON line: {rps, p99 (ms), non2xx, errors, total}.
local bodies = {}
local count = 0
local counter = 0
local threads = 0

-- A prefix per run and thread: delivery ids never repeat, across threads or runs on one store.
math.randomseed(os.time() + math.floor(os.clock() * 1e6))
function setup(thread)
  threads = threads + 1
  thread:set("prefix", string.format("%08x%08x-%d-", math.random(0, 0x7fffffff), math.random(0, 0x7fffffff), threads))
end

function init(args)
  -- Without bodies every request is the same GET, which wrk then builds once.
  if args[1] == nil then
    request = nil
    return
  end
  for line in io.lines(args[1]) do
    local tab = line:find("\t", 1, true)
    count = count + 1
    bodies[count] = { line:sub(1, tab - 1), line:sub(tab + 1) }
  end
end

function request()
  counter = counter + 1
  local body = bodies[(counter % count) + 1]
  return wrk.format("POST", nil, {
    ["Content-Type"] = "application/json",
    ["X-GitHub-Event"] = "push",
    ["X-GitHub-Delivery"] = prefix .. counter,
    ["X-GitHub-Hook-ID"] = "1",
    ["X-Hub-Signature-256"] = body[1],
  }, body[2])
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format('{"rps":%.1f,"p99":%.2f,"non2xx":%d,"errors":%d,"total":%d}\n',
    summary.requests / (summary.duration / 1e6), latency:percentile(99) / 1000, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout, summary.requests))
end
