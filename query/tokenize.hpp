// The one tokenizer of requests and lexicon phrases (shared with the lexicon compiler).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kwiki::detail {

/// Lowercases ASCII and splits on anything but letters, digits, '_', '.', '+', ':', '/', '#' and
/// non-ASCII bytes; strips sentence punctuation from token ends ("rmsnorm." -> "rmsnorm").
std::vector<std::string> tokenize(std::string_view text);

/// The phrase key of a name: its tokens joined by single spaces.
std::string phrase_key(std::string_view name);

}  // namespace kwiki::detail
