//===- ChatTemplate.h - Jinja chat templates of tokenizer_config.json -----===//
//
// Renders a checkpoint's chat template the way Hugging Face transformers'
// apply_chat_template does: Jinja with trim_blocks and lstrip_blocks, the
// loop-controls extension, `tojson` as json.dumps without key sorting or
// ASCII escaping, and the globals raise_exception() and strftime_now().
// The subset covered is what real chat templates use: if/elif/else,
// for (with unpacking, a filter condition, else, loop.*), set (also of
// namespace attributes and as a block), macros, break/continue; Python-like
// values, operators, string/list/dict methods, the common filters and tests.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TEXT_CHATTEMPLATE_H
#define SPARK_TEXT_CHATTEMPLATE_H

#include <memory>
#include <string>
#include <string_view>

namespace spark::text {

struct TemplateNode;

class ChatTemplate {
public:
  /// Parses `source`; `name` names it in errors ("tokenizer_config.json:
  /// chat_template"). Throws TextError with the line of a syntax error.
  static std::unique_ptr<ChatTemplate> parse(const std::string &source,
                                             const std::string &name);
  ~ChatTemplate();

  /// Renders with the variables of a JSON object (messages, tools,
  /// add_generation_prompt, bos_token, ...). Throws TextError for a
  /// template error (raise_exception included) naming the line.
  std::string render(std::string_view variablesJson) const;

private:
  ChatTemplate();
  std::string name;
  std::unique_ptr<TemplateNode> root;
};

/// What a checkpoint folder says about chat: the template (from
/// tokenizer_config.json's chat_template, a string or a list of named
/// templates of which "default" is taken, or from chat_template.jinja) and
/// the special tokens templates refer to.
struct ChatConfig {
  std::string source;   // the template text
  std::string origin;   // where it came from, for messages
  std::string bosToken; // "" when unset
  std::string eosToken;
};

/// Reads `dir`/tokenizer_config.json (and chat_template.jinja). Throws
/// TextError naming the file and field when there is no template.
ChatConfig loadChatConfig(const std::string &dir);

/// The variables of `variablesJson` (a JSON object) with bos_token and
/// eos_token added from `config` where the object does not set them, as
/// transformers passes the tokenizer's special tokens to templates.
/// `name` names the variables in errors.
std::string withSpecialTokens(std::string_view variablesJson,
                              const std::string &name,
                              const ChatConfig &config);

} // namespace spark::text

#endif // SPARK_TEXT_CHATTEMPLATE_H
