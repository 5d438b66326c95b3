//===- Tokenizer.h - Hugging Face tokenizer.json, encode and decode -------===//
//
// Reads a Hugging Face `tokenizer.json` and encodes/decodes the way the
// `tokenizers` library does: added tokens split out first, then the
// normalizer, the pre-tokenizer and the BPE model on the rest; the decoder
// chain on the way back. Byte-level BPE (GPT-2 / Llama-3 / Qwen / GLM) and
// SentencePiece-style BPE with byte fallback (Llama-2 / Gemma) are covered;
// anything else in a file is refused with the field that names it.
//
// Regexes are PCRE2 (UTF + UCP, JIT), normalization forms ICU.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TEXT_TOKENIZER_H
#define SPARK_TEXT_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace spark::text {

/// Every error of the text layer: the message names the file and the field.
struct TextError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Replaces each invalid UTF-8 sequence by U+FFFD, one per maximal subpart
/// (the WHATWG / Unicode rule that Node.js and Python also follow). Returns
/// the number of replacements; *firstBad receives the byte offset of the
/// first one.
size_t sanitizeUtf8(std::string_view in, std::string &out,
                    size_t *firstBad = nullptr);

/// Length of the longest prefix of `s` that ends on a complete UTF-8
/// character; *invalid is set when the remaining tail can never complete.
size_t completeUtf8Prefix(std::string_view s, bool *invalid);

class TokenizerImpl;

class Tokenizer {
public:
  /// `path` is a tokenizer.json file or a folder holding one.
  static std::unique_ptr<Tokenizer> load(const std::string &path);
  static std::unique_ptr<Tokenizer> fromJson(std::string_view json,
                                             const std::string &name);
  ~Tokenizer();

  /// Encodes UTF-8 text (invalid sequences are encoded as U+FFFD).
  /// addSpecial applies the file's post-processor (BOS and the like).
  std::vector<int32_t> encode(std::string_view text, bool addSpecial) const;

  /// The text of `ids`, invalid UTF-8 replaced by U+FFFD.
  std::string decode(const std::vector<int32_t> &ids, bool skipSpecial) const;
  /// The bytes the decoder chain produces, without UTF-8 repair.
  std::string decodeBytes(const int32_t *ids, size_t n, bool skipSpecial) const;

  int32_t vocabSize() const;
  std::optional<int32_t> tokenId(std::string_view content) const;
  /// The token's string as stored in the file ("" for an unused id).
  const std::string &tokenString(int32_t id) const;
  bool isSpecial(int32_t id) const;
  /// The file the tokenizer was read from.
  const std::string &path() const;

private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl;
};

/// Incremental decoding for generation: push ids one at a time and receive
/// text that never ends inside a UTF-8 character. Bytes that can never form
/// a character come out as U+FFFD.
class DecodeStream {
public:
  DecodeStream(const Tokenizer &tokenizer, bool skipSpecial);
  /// Appends the text that `id` completes (possibly nothing) to `out`.
  void push(int32_t id, std::string &out);
  /// Appends whatever is held back (as U+FFFD) and starts over.
  void flush(std::string &out);

private:
  const Tokenizer &tokenizer;
  bool skipSpecial;
  std::vector<int32_t> ids; // context token(s) then pending tokens
  size_t prefixBytes = 0;   // bytes of ids already written
};

} // namespace spark::text

#endif // SPARK_TEXT_TOKENIZER_H
