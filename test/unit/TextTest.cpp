//===- TextTest.cpp - the text layer's units ------------------------------===//
#include "ChatTemplate.h"
#include "Tokenizer.h"
#include "spark/text.h"

#include <gtest/gtest.h>

using namespace spark::text;

namespace {

const std::string kNano = SPARK_SOURCE_DIR "/models/spark-nano";

std::string repaired(std::string_view s) {
  std::string out;
  sanitizeUtf8(s, out);
  return out;
}

const std::string kFFFD = "\xEF\xBF\xBD";

// A SentencePiece-style vocabulary with byte fallback (as Llama-2 / Gemma).
const char *kByteFallback = R"({
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true,
    "fuse_unk": true,
    "vocab": {"<unk>": 0, "<0xE4>": 1, "<0xBD>": 2, "<0xA0>": 3, "<0xFF>": 4,
              "\u2581": 5, "a": 6, "b": 7, "\u2581a": 8, "ab": 9, "\u2581ab": 10},
    "merges": ["\u2581 a", "a b", "\u2581a b"]}
})";

} // namespace

TEST(Utf8, MaximalSubpartsBecomeOneReplacementEach) {
  EXPECT_EQ(repaired("ok"), "ok");
  EXPECT_EQ(repaired("a\xE2\x82z"), "a" + kFFFD + "z");        // truncated
  EXPECT_EQ(repaired("\xF0\x9F\x98 "), kFFFD + " ");            // truncated 4-byte
  EXPECT_EQ(repaired("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);   // surrogate
  EXPECT_EQ(repaired("\xC0\xAF"), kFFFD + kFFFD);               // overlong
  EXPECT_EQ(repaired("\x80\x80"), kFFFD + kFFFD);               // lone continuations
  EXPECT_EQ(repaired("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD); // > U+10FFFF
  size_t first = 99;
  std::string out;
  EXPECT_EQ(sanitizeUtf8("ab\xFF" "c\xFE", out, &first), 2u);
  EXPECT_EQ(first, 2u);
}

TEST(Utf8, CompletePrefixHoldsBackOnlyWhatCanComplete) {
  bool invalid;
  EXPECT_EQ(completeUtf8Prefix("a\xE4\xBD", &invalid), 1u);
  EXPECT_FALSE(invalid);
  EXPECT_EQ(completeUtf8Prefix("a\xE4\xBD\xA0", &invalid), 4u);
  EXPECT_EQ(completeUtf8Prefix("a\xFF", &invalid), 1u);
  EXPECT_TRUE(invalid);
}

TEST(Tokenizer, ByteFallbackEncodesUnknownCharactersAsBytes) {
  auto t = Tokenizer::fromJson(kByteFallback, "inline.json");
  // "ab" -> "▁ab"; "你" (E4 BD A0) has no token: its bytes; "c" -> <unk>,
  // and the unknown run "cc" fuses into one <unk>.
  EXPECT_EQ(t->encode("ab", false), (std::vector<int32_t>{10}));
  EXPECT_EQ(t->encode("\xE4\xBD\xA0", false), (std::vector<int32_t>{5, 1, 2, 3}));
  EXPECT_EQ(t->encode("acc", false), (std::vector<int32_t>{8, 0}));
  EXPECT_EQ(t->decode({10, 5, 1, 2, 3}, false), "ab \xE4\xBD\xA0");
}

TEST(Tokenizer, MalformedVocabularyAndMergesNameTheField) {
  auto errorOf = [](const std::string &json) {
    try {
      Tokenizer::fromJson(json, "t.json");
    } catch (const TextError &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(errorOf(R"({"model": {"vocab": {"a": 0, "b": "one"}, "merges": []}})"),
            "t.json: model.vocab: token 'b': expected an id in [0, 2^31)");
  EXPECT_EQ(errorOf(R"({"model": {"vocab": {"a": 0, "b": {"x": 1}}, "merges": []}})"),
            "t.json: model.vocab: token 'b': expected an id in [0, 2^31)");
  EXPECT_EQ(errorOf(R"({"model": {"vocab": {"a": 0, "a": 1}, "merges": []}})"),
            "t.json: model.vocab: token 'a' appears twice");
  EXPECT_EQ(errorOf(R"({"model": {"vocab": ["a"], "merges": []}})"),
            "t.json: model.vocab: expected an object of token -> id");
  EXPECT_EQ(errorOf(R"({"model": {"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [7]}})"),
            "t.json: model.merges[0]: expected \"left right\" or [left, right]");
  EXPECT_EQ(errorOf(R"({"model": {"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a"]]}})"),
            "t.json: model.merges[0]: expected \"left right\" or [left, right]");
  EXPECT_EQ(errorOf(R"({"model": {"vocab": {"a": 0}, "merges": {}}})"),
            "t.json: model.merges: expected an array");
  // An id space mostly empty (found by fuzz-tokenizer: id 1111111111 asked
  // for 35 GB); a padded vocabulary with a few gaps still opens.
  EXPECT_EQ(errorOf(R"({"model": {"vocab": {"a": 0, "b": 1111111111}, "merges": []}})"),
            "t.json: model.vocab: token 'b' has id 1111111111 but only 2 tokens are "
            "defined; expected ids below 260");
  EXPECT_EQ(errorOf(R"({"model": {"vocab": {"a": 0}, "merges": []}, "added_tokens":
      [{"id": 2147483647, "content": "<x>"}]})"),
            "t.json: model.vocab: token '<x>' has id 2147483647 but only 2 tokens are "
            "defined; expected ids below 260");
  EXPECT_EQ(errorOf(R"({"model": {"vocab": {"a": 0, "b": 259}, "merges": []}})"), "");
  // Both spellings of merges, and the rest of the file as usual.
  auto t = Tokenizer::fromJson(R"({"model": {"vocab": {"a": 0, "b": 1, "ab": 2, "c": 3,
      "abc": 4}, "merges": [["a", "b"], "ab c"]}, "added_tokens": [{"id": 5,
      "content": "<x>", "special": true}]})", "t.json");
  EXPECT_EQ(t->encode("abc<x>ab", false), (std::vector<int32_t>{4, 5, 2}));
}

TEST(DecodeStream, HoldsBytesUntilTheCharacterIsComplete) {
  auto t = Tokenizer::fromJson(kByteFallback, "inline.json");
  DecodeStream stream(*t, false);
  std::vector<std::string> pieces;
  for (int32_t id : {10, 5, 1, 2, 3, 8}) {
    std::string out;
    stream.push(id, out);
    pieces.push_back(out);
  }
  EXPECT_EQ(pieces, (std::vector<std::string>{"ab", " ", "", "", "\xE4\xBD\xA0", " a"}));
}

TEST(DecodeStream, BytesThatCannotCompleteComeOutAsReplacement) {
  auto t = Tokenizer::fromJson(kByteFallback, "inline.json");
  DecodeStream stream(*t, false);
  std::string out;
  stream.push(6, out);
  stream.push(1, out); // E4: could still complete
  EXPECT_EQ(out, "a");
  stream.push(4, out); // FF: never
  EXPECT_EQ(out, "a" + kFFFD + kFFFD);
  std::string rest;
  stream.push(1, rest);
  stream.flush(rest); // E4 held, then flushed
  EXPECT_EQ(rest, kFFFD);
}

TEST(DecodeStream, ConcatenationEqualsDecodeOnSparkNano) {
  auto t = Tokenizer::load(kNano);
  std::string text = "Open Wi-Fi, s'il vous plaît: 你好 😀 — done.\n  indent";
  std::vector<int32_t> ids = t->encode(text, false);
  DecodeStream stream(*t, false);
  std::string all;
  for (int32_t id : ids) {
    std::string piece;
    stream.push(id, piece);
    bool invalid;
    EXPECT_EQ(completeUtf8Prefix(piece, &invalid), piece.size()) << "broken UTF-8 out";
    all += piece;
  }
  stream.flush(all);
  EXPECT_EQ(all, text);
  EXPECT_EQ(t->decode(ids, false), text);
}

TEST(TextApi, EncodeReportsTheNeededCount) {
  spark_tokenizer *tok = nullptr;
  char err[256] = "";
  ASSERT_EQ(spark_tokenizer_open(kNano.c_str(), &tok, err, sizeof err), SPARK_TEXT_OK) << err;
  int32_t ids[2];
  size_t n = 0;
  const char *text = "a longer sentence than two tokens";
  EXPECT_EQ(spark_tokenizer_encode(tok, text, strlen(text), 0, ids, 2, &n),
            SPARK_TEXT_ERROR_TOO_SMALL);
  EXPECT_GT(n, 2u);
  std::vector<int32_t> all(n);
  EXPECT_EQ(spark_tokenizer_encode(tok, text, strlen(text), 0, all.data(), n, &n), SPARK_TEXT_OK);
  char back[64];
  size_t len = 0;
  EXPECT_EQ(spark_tokenizer_decode(tok, all.data(), n, 0, back, sizeof back, &len), SPARK_TEXT_OK);
  EXPECT_EQ(std::string(back, len), text);
  int32_t bad = 1 << 30;
  EXPECT_EQ(spark_tokenizer_decode(tok, &bad, 1, 0, back, sizeof back, &len),
            SPARK_TEXT_ERROR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(spark_tokenizer_token_id(tok, "<|user|>"), 4083);
  EXPECT_TRUE(spark_tokenizer_is_special(tok, 4083));
  spark_tokenizer_close(tok);
}

TEST(TextApi, OpenNamesTheFile) {
  spark_tokenizer *tok = nullptr;
  char err[256] = "";
  EXPECT_EQ(spark_tokenizer_open("/nonexistent/dir", &tok, err, sizeof err), SPARK_TEXT_ERROR_FILE);
  EXPECT_EQ(tok, nullptr);
  EXPECT_NE(std::string(err).find("/nonexistent/dir"), std::string::npos) << err;
}

//===----------------------------------------------------------------------===//
// Tool calls
//===----------------------------------------------------------------------===//

#include "ToolCalls.h"

#include <fstream>
#include <random>
#include <sstream>

namespace {

/// Feeds `text` in pieces of `step` bytes, then finishes.
std::vector<ToolEvent> parse(const std::string &text, size_t step = 1, size_t budget = 0) {
  ToolCallParser p(budget);
  std::vector<ToolEvent> events;
  for (size_t i = 0; i < text.size(); i += step)
    p.feed(text.substr(i, step), events);
  p.finish(events);
  return events;
}

std::string kinds(const std::vector<ToolEvent> &events) {
  std::string s;
  for (auto &e : events)
    s += "CTKR"[e.kind];
  return s;
}

} // namespace

TEST(ToolCallParser, SparkFormatStreamedByteByByte) {
  std::string text = "Sure. <think>Wi-Fi is under Network.</think><tool_call>tap<arg_key>index"
                     "</arg_key><arg_value>3</arg_value></tool_call>";
  for (size_t step : {1, 2, 5, 1000}) {
    auto ev = parse(text, step);
    ASSERT_EQ(kinds(ev), "CTK") << "step " << step;
    EXPECT_EQ(ev[0].text, "Sure. ");
    EXPECT_EQ(ev[1].text, "Wi-Fi is under Network.");
    EXPECT_EQ(ev[2].call.name, "tap");
    ASSERT_EQ(ev[2].call.arguments.size(), 1u);
    EXPECT_EQ(ev[2].call.arguments[0], (std::pair<std::string, std::string>{"index", "3"}));
    EXPECT_EQ(ev[2].call.argumentsJson(), R"({"index":3})");
  }
}

TEST(ToolCallParser, TextThatOnlyLooksLikeATagStaysText) {
  auto ev = parse("a < b and <b>bold</b> and config {\"a\": 1} done", 3);
  ASSERT_EQ(kinds(ev), "C");
  EXPECT_EQ(ev[0].text, "a < b and <b>bold</b> and config {\"a\": 1} done");
}

TEST(ToolCallParser, BracketLineWithUnterminatedJson) {
  // What a small model was seen to write instead of a call.
  auto ev = parse("[tap]\n{\"tool\": \"tap\", \"parameters\": {\"index\": 1}", 1);
  ASSERT_EQ(kinds(ev), "RRK");
  EXPECT_NE(ev[0].text.find("bracketed [tap]"), std::string::npos) << ev[0].text;
  EXPECT_NE(ev[1].text.find("1 closing brace"), std::string::npos) << ev[1].text;
  EXPECT_EQ(ev[2].call.name, "tap");
  EXPECT_EQ(ev[2].call.argumentsJson(), R"({"index":1})");
}

TEST(ToolCallParser, BracketLineWithBareArguments) {
  auto ev = parse("[open_app]\n{\"name\": \"Clock\"}\n", 4);
  ASSERT_EQ(kinds(ev), "RKC");
  EXPECT_EQ(ev[1].call.name, "open_app");
  EXPECT_EQ(ev[1].call.argumentsJson(), R"({"name":"Clock"})");
}

TEST(ToolCallParser, BareJsonCall) {
  auto ev = parse("{\"name\": \"open_app\", \"arguments\": {\"name\": \"Clock\"}}", 7);
  ASSERT_EQ(kinds(ev), "RK");
  EXPECT_NE(ev[0].text.find("bare JSON"), std::string::npos);
  EXPECT_EQ(ev[1].call.name, "open_app");
}

TEST(ToolCallParser, UnbalancedBraces) {
  auto ev = parse("{\"name\": \"swipe\", \"arguments\": {\"direction\": \"up\"", 2);
  ASSERT_EQ(kinds(ev), "RRK");
  EXPECT_NE(ev[1].text.find("2 closing brace"), std::string::npos) << ev[1].text;
  EXPECT_EQ(ev[2].call.argumentsJson(), R"({"direction":"up"})");
}

TEST(ToolCallParser, ThinkingBudget) {
  auto ev = parse("<think>" + std::string(50, 'x') + " and more", 3, 20);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(kinds(ev).substr(0, 3), "TRC");
  EXPECT_EQ(ev[0].text, std::string(20, 'x'));
  EXPECT_NE(ev[1].text.find("budget of 20 bytes"), std::string::npos);
}

TEST(ToolCallParser, ThinkNeverClosed) {
  auto ev = parse("<think>still thinking", 1);
  ASSERT_EQ(kinds(ev), "TR");
  EXPECT_EQ(ev[0].text, "still thinking");
  EXPECT_EQ(ev[1].text, "<think> was never closed");
}

TEST(ToolCallParser, UnterminatedCallAndValue) {
  auto ev = parse("<tool_call>type_text<arg_key>text</arg_key><arg_value>hello", 1);
  ASSERT_EQ(kinds(ev), "RRK");
  EXPECT_EQ(ev[2].call.name, "type_text");
  EXPECT_EQ(ev[2].call.argumentsJson(), R"({"text":"hello"})");
}

TEST(ToolCallParser, InvalidUtf8InAnArgumentIsReplacedInJson) {
  // Found by fuzz-tool_calls: the JSON writer threw on invalid UTF-8.
  auto ev = parse("<tool_call>type_text<arg_key>t\x88</arg_key><arg_value>a\xff</arg_value>"
                  "</tool_call>", 3);
  ASSERT_EQ(kinds(ev), "K");
  EXPECT_EQ(ev[0].call.argumentsJson(), "{\"t\xEF\xBF\xBD\":\"a\xEF\xBF\xBD\"}");
}

TEST(ToolCallParser, ValuesThatAreNotJsonScalarsStayStrings) {
  // Found by fuzz-tool_calls in CI: "06" passed strtod but is no JSON
  // number, and the JSON parser's exception ended the process.
  auto ev = parse("<tool_call>tap<arg_key>a</arg_key><arg_value>06</arg_value><arg_key>b"
                  "</arg_key><arg_value>0x1F</arg_value><arg_key>c</arg_key><arg_value>-inf"
                  "</arg_value><arg_key>d</arg_key><arg_value>-2.5e3</arg_value><arg_key>e"
                  "</arg_key><arg_value>true</arg_value><arg_key>f</arg_key><arg_value>7"
                  "</arg_value></tool_call>", 5);
  ASSERT_EQ(kinds(ev), "K");
  EXPECT_EQ(ev[0].call.argumentsJson(),
            "{\"a\":\"06\",\"b\":\"0x1F\",\"c\":\"-inf\",\"d\":-2500.0,\"e\":true,"
            "\"f\":7}");
}

TEST(ToolCallParser, CallWithoutNameIsKeptAsText) {
  auto ev = parse("<tool_call><arg_key>a</arg_key></tool_call>", 1);
  ASSERT_EQ(kinds(ev), "RC");
  EXPECT_EQ(ev[1].text, "<tool_call><arg_key>a</arg_key></tool_call>");
}

namespace {
std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Samples from seeded random logits under the grammar until it is done.
std::string generate(const Tokenizer &t, ToolGrammar &g, uint32_t seed, int maxSteps,
                     std::vector<int32_t> *ids) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.f, 3.f);
  std::vector<float> logits(t.vocabSize());
  for (int step = 0; step < maxSteps && !g.done(); ++step) {
    for (auto &l : logits)
      l = noise(rng);
    size_t allowed = g.mask(logits.data(), t.vocabSize());
    EXPECT_GT(allowed, 0u);
    int32_t best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_TRUE(g.accept(best)) << "masked argmax " << best << " was refused";
    ids->push_back(best);
  }
  return t.decode(*ids, true);
}
} // namespace

TEST(ToolGrammar, RandomLogitsAlwaysGiveAWellFormedCall) {
  auto t = Tokenizer::load(kNano);
  std::string toolsJson = readText(SPARK_SOURCE_DIR "/test/text/chat/multi-tools.json");
  size_t at = toolsJson.find("\"tools\":");
  size_t end = toolsJson.find("\"add_generation_prompt\"");
  std::string list = toolsJson.substr(at + 8, end - at - 8);
  list = list.substr(0, list.rfind(']') + 1);
  auto tools = parseToolSpecs(list, "multi-tools.json");
  int32_t eos = *t->tokenId("<|endoftext|>");
  for (bool thinking : {false, true}) {
    for (uint32_t seed = 1; seed <= 20; ++seed) {
      ToolGrammar g(*t, tools, {eos}, thinking, thinking ? 64 : 0);
      std::vector<int32_t> ids;
      std::string text = generate(*t, g, seed, 400, &ids);
      ASSERT_TRUE(g.done()) << "seed " << seed << ": " << text;
      EXPECT_EQ(ids.back(), eos);
      auto ev = parse(text, 1);
      std::string k = kinds(ev);
      ASSERT_EQ(k.back(), 'K') << text;
      EXPECT_EQ(k.find('R'), std::string::npos) << "a recovery on grammar output: " << text;
      for (auto &e : ev) {
        if (e.kind == ToolEvent::Content) {
          EXPECT_EQ(e.text.find_first_not_of(" \n"), std::string::npos) << text;
        }
      }
      const ToolCall &call = ev.back().call;
      auto spec = std::find_if(tools.begin(), tools.end(),
                               [&](const ToolSpec &s) { return s.name == call.name; });
      ASSERT_NE(spec, tools.end()) << call.name;
      for (auto &p : spec->params) {
        auto arg = std::find_if(call.arguments.begin(), call.arguments.end(),
                                [&](auto &a) { return a.first == p.name; });
        if (p.required) {
          EXPECT_NE(arg, call.arguments.end()) << p.name << " missing in " << text;
        }
        if (arg == call.arguments.end())
          continue;
        const std::string &v = arg->second;
        if (!p.enumValues.empty()) {
          EXPECT_NE(std::find(p.enumValues.begin(), p.enumValues.end(), v), p.enumValues.end())
              << v;
        } else if (p.type == ToolParam::Integer) {
          EXPECT_TRUE(!v.empty() && v.find_first_not_of("-0123456789") == std::string::npos) << v;
        } else if (p.type == ToolParam::Boolean) {
          EXPECT_TRUE(v == "true" || v == "false") << v;
        } else if (p.type == ToolParam::Number) {
          EXPECT_TRUE(!v.empty() && v.find_first_not_of("-.0123456789") == std::string::npos) << v;
        }
      }
    }
  }
}

TEST(ToolGrammar, ForbidsWhatTheFormatForbids) {
  auto t = Tokenizer::load(kNano);
  auto tools = parseToolSpecs(R"([{"name": "tap", "parameters": {"properties":
      {"index": {"type": "integer"}}, "required": ["index"]}}])", "inline");
  int32_t eos = *t->tokenId("<|endoftext|>");
  ToolGrammar g(*t, tools, {eos}, false);
  auto accept = [&](const std::string &text) {
    for (int32_t id : t->encode(text, false))
      if (!g.accept(id))
        return false;
    return true;
  };
  EXPECT_FALSE(g.allows(eos));
  EXPECT_FALSE(accept("Hello")); // text before the call
  g.reset();
  EXPECT_TRUE(accept("<tool_call>tap"));
  EXPECT_FALSE(g.allows(*t->tokenId("</tool_call>"))); // index is required
  EXPECT_TRUE(accept("<arg_key>index</arg_key><arg_value>"));
  EXPECT_FALSE(accept("abc")); // not an integer
  EXPECT_TRUE(accept("12</arg_value></tool_call>"));
  EXPECT_TRUE(g.allows(eos));
  EXPECT_TRUE(g.accept(eos));
  EXPECT_TRUE(g.done());
}

TEST(ToolGrammar, ToolsFileErrorsNameTheField) {
  EXPECT_THROW(parseToolSpecs("[{\"type\": \"function\"}]", "tools.json"), TextError);
  try {
    parseToolSpecs("[{\"name\": \"a b\"}]", "tools.json");
    FAIL();
  } catch (const TextError &e) {
    EXPECT_NE(std::string(e.what()).find("tools.json: [0].name: 'a b'"), std::string::npos)
        << e.what();
  }
}

// Template arithmetic has 64-bit integers (Python's are unbounded): a
// result that leaves them is an error naming the line, never undefined
// behaviour (fuzz-chat_template found "-(-9223372036854775807) - ..." under
// UBSan; kept as corpus/chat_template/regression-integer-overflow).
TEST(ChatTemplate, IntegerOverflowIsAnErrorNamingTheLine) {
  auto render = [](const std::string &source) {
    try {
      return spark::text::ChatTemplate::parse(source, "t.jinja")->render("{}");
    } catch (const TextError &e) {
      return std::string("error: ") + e.what();
    }
  };
  EXPECT_EQ(render("{{ 2 ** 62 - 1 + 2 ** 62 }}"), "9223372036854775807");
  EXPECT_EQ(render("{{ -7 // 2 }} {{ -7 % 2 }} {{ (-1) ** 1000000000000 }} {{ 3 ** 0 }}"),
            "-4 1 1 1");
  for (const char *overflow :
       {"{{ 9223372036854775807 + 1 }}", "\n{{ -9223372036854775807 - 2 }}",
        "{{ 4611686018427387904 * 2 }}", "{{ 3 ** 40 }}",
        "{{ -(-9223372036854775807 - 1) }}", "{{ (-9223372036854775807 - 1) // -1 }}"}) {
    std::string out = render(overflow);
    EXPECT_NE(out.find("integer overflow"), std::string::npos) << overflow << ": " << out;
    EXPECT_NE(out.find("t.jinja"), std::string::npos) << out;
  }
  EXPECT_NE(render("{{ 99999999999999999999 }}").find("out of range"), std::string::npos);
}

// Nesting is bounded so that a hostile template cannot exhaust the stack
// (fuzz-chat_template overflowed it with thousands of '['; kept as
// corpus/chat_template/regression-deep-nesting).
TEST(ChatTemplate, DeepNestingIsAnErrorNotAStackOverflow) {
  auto repeat = [](const std::string &s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i)
      out += s;
    return out;
  };
  auto render = [](const std::string &source) {
    try {
      return spark::text::ChatTemplate::parse(source, "t.jinja")->render("{}");
    } catch (const TextError &e) {
      return std::string("error: ") + e.what();
    }
  };
  EXPECT_EQ(render("{{ " + std::string(100, '(') + "1" + std::string(100, ')') + " }}"), "1");
  for (const std::string &deep :
       {"{{ " + std::string(2000, '[') + " }}", "{{ " + std::string(3000, '(') + "1 }}",
        "{{ " + std::string(1000, '-') + "1 }}", "{{ " + repeat("not ", 1000) + "1 }}"}) {
    std::string out = render(deep);
    EXPECT_NE(out.find("nested more than 128 deep"), std::string::npos) << out.substr(0, 200);
  }
  std::string manyIfs;
  for (int i = 0; i < 1000; ++i)
    manyIfs += "{% if true %}";
  EXPECT_NE(render(manyIfs).find("blocks nested more than 128 deep"), std::string::npos);
  std::string longSum = "{{ 1";
  for (int i = 0; i < 3000; ++i)
    longSum += " + 1";
  EXPECT_NE(render(longSum + " }}").find("tokens; at most 4096"), std::string::npos);
}
