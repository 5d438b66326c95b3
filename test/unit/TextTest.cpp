//===- TextTest.cpp - the text layer's units ------------------------------===//
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
