-- wrk script for benches/scale.sh: /search requests whose query differs on every request, so
-- the two-second result cache (src/search/cache.rs) answers none of them and every request
-- pays for a real search. SEARCH_FAMILY picks the kind of search:
--   single   one word            several  two or three words
--   phrase   a quoted phrase     negation a word and a negated word
--   mix      a realistic mix (see below)
-- Each request takes the family's next query and varies the case of its letters (the search
-- folds case, so every variant finds the same documents); once a query's case variants are
-- used up, a prefix of punctuation (which the tokenizer drops) makes it new again. Each wrk
-- thread starts 100 000 queries further on, so the threads do not repeat each other.
--
-- The mix: visitors repeat popular searches. Every search string of the four families and
-- each of its variants is ranked (the families' plain queries first, then their first case
-- variants, and so on, MIX_RANKS strings in all) and a request picks rank k with a chance
-- about proportional to 1/k (Zipf-like): the few most popular strings come back many times a
-- second, so the result cache answers them, while most of the tail is asked once. At the end
-- wrk prints how many requests repeated a string their thread had asked before (the share
-- the cache could answer, if the repeat came within its two seconds).

local families = {
  single = { "jazz", "piano", "coltrane", "casablanca", "neuromancer", "foundation",
             "voyage", "ellington", "godfather", "chorus", "horns", "masterpiece" },
  several = { "miles davis", "scott joplin piano", "star wars alien", "blue jazz session",
              "love supreme coltrane", "liner notes story", "roman holiday film",
              "ancient rome history" },
  phrase = { '"kind of blue"', '"a love supreme"', '"the second chorus"', '"maiden voyage"',
             '"star wars"', '"the big sleep"', '"brushed snare"', '"roman holiday"' },
  negation = { "jazz -blue", "piano -joplin", "blues -really", "chorus -piano",
               "holiday -roman", "space -odyssey", "falcon -maltese", "jazz -piano" },
}

local family = os.getenv("SEARCH_FAMILY") or "single"
local queries = families[family] or families.single
-- The mix ranks every family's queries (in a fixed order: pairs() would not give one).
local mixed = {}
for _, name in ipairs({ "single", "several", "phrase", "negation" }) do
  for _, q in ipairs(families[name]) do mixed[#mixed + 1] = q end
end
local mix_ranks = tonumber(os.getenv("MIX_RANKS") or "") or 100000
local asked = {}
-- Globals, so `done` can read them from each thread's state (thread:get sees no locals).
mix_repeats = 0
mix_requests = 0
local threads = {}
local punctuation = { ".", ",", "!", "?", ";", ":" }
local counter = 0
-- Threads numbered by setup (in wrk's main state); each thread reads its number from the
-- global `thread_number` that setup sets in its state (a local of that name would hide it,
-- and then every thread sent the same queries, half of them answered by the other's search).
local threads_made = 0

function setup(thread)
  thread:set("thread_number", threads_made)
  threads_made = threads_made + 1
  threads[#threads + 1] = thread
end

function init(args)
  -- wrk copies `thread_number` into each thread's state from setup.
  counter = (tonumber(thread_number) or 0) * 100000
  math.randomseed(7919 * ((tonumber(thread_number) or 0) + 1))
end

local function letters(q)
  local n = 0
  for _ in q:gmatch("%a") do n = n + 1 end
  return n
end

local function variant(q, k)
  local n = letters(q)
  local mask = k % (2 ^ n)
  local overflow = math.floor(k / (2 ^ n))
  local bit = 0
  local out = q:gsub("%a", function(c)
    local upper = math.floor(mask / (2 ^ bit)) % 2 == 1
    bit = bit + 1
    if upper then return c:upper() end
    return c:lower()
  end)
  if overflow > 0 then
    local prefix = ""
    while overflow > 0 do
      prefix = prefix .. punctuation[(overflow % #punctuation) + 1]
      overflow = math.floor(overflow / #punctuation)
    end
    out = prefix .. " " .. out
  end
  return out
end

local function encode(s)
  return (s:gsub("[^%w]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

-- A rank from 1 to mix_ranks, rank k with a chance about proportional to 1/k: the inverse of
-- the continuous Zipf (s = 1) distribution's CDF, ln(k) / ln(ranks + 1).
local function zipf_rank()
  local k = math.floor(math.exp(math.random() * math.log(mix_ranks + 1)))
  return math.max(1, math.min(mix_ranks, k))
end

function request()
  local text
  if family == "mix" then
    local k = zipf_rank() - 1
    text = variant(mixed[(k % #mixed) + 1], math.floor(k / #mixed))
    mix_requests = mix_requests + 1
    if asked[text] then mix_repeats = mix_repeats + 1 else asked[text] = true end
  else
    local q = queries[(counter % #queries) + 1]
    local k = math.floor(counter / #queries)
    counter = counter + 1
    text = variant(q, k)
  end
  return wrk.format("GET", "/search?q=" .. encode(text))
end

function done(summary, latency, requests_done)
  if family ~= "mix" then return end
  local sent, repeated = 0, 0
  for _, thread in ipairs(threads) do
    sent = sent + (tonumber(thread:get("mix_requests")) or 0)
    repeated = repeated + (tonumber(thread:get("mix_repeats")) or 0)
  end
  if sent > 0 then
    io.write(string.format("mix: %d of %d requests (%.0f%%) repeated an earlier search\n",
      repeated, sent, 100 * repeated / sent))
  end
end
