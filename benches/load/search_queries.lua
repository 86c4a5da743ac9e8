-- wrk script for benches/scale.sh: /search requests whose query differs on every request, so
-- the two-second result cache (src/search/cache.rs) answers none of them and every request
-- pays for a real search. SEARCH_FAMILY picks the kind of search:
--   single   one word            several  two or three words
--   phrase   a quoted phrase     negation a word and a negated word
-- Each request takes the family's next query and varies the case of its letters (the search
-- folds case, so every variant finds the same documents); once a query's case variants are
-- used up, a prefix of punctuation (which the tokenizer drops) makes it new again. The two wrk
-- threads start half a period apart so they do not repeat each other.

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
local punctuation = { ".", ",", "!", "?", ";", ":" }
local counter = 0
local thread_number = 0

function setup(thread)
  thread:set("thread_number", thread_number)
  thread_number = thread_number + 1
end

function init(args)
  -- wrk copies `thread_number` into each thread's state from setup.
  counter = (tonumber(thread_number) or 0) * 100000
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

function request()
  local q = queries[(counter % #queries) + 1]
  local k = math.floor(counter / #queries)
  counter = counter + 1
  return wrk.format("GET", "/search?q=" .. encode(variant(q, k)))
end
