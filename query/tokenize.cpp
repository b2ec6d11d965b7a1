// The one tokenizer of requests and lexicon phrases (shared with the lexicon compiler).
#include "tokenize.hpp"

#include <cctype>

namespace kwiki::detail {
namespace {

bool is_token_char(unsigned char c) {
  return std::isalnum(c) || c == '_' || c == '.' || c == '+' || c == ':' || c == '/' || c == '#' || c >= 0x80;
}

}  // namespace

std::vector<std::string> tokenize(std::string_view text) {
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&] {
    while (!current.empty() && (current.back() == '.' || current.back() == ':' || current.back() == '/' || current.back() == '#'))
      current.pop_back();
    std::size_t lead = 0;
    while (lead < current.size() && (current[lead] == '.' || current[lead] == ':' || current[lead] == '/' ||
                                     current[lead] == '+' || current[lead] == '#'))
      ++lead;
    if (lead < current.size()) tokens.push_back(current.substr(lead));
    current.clear();
  };
  for (unsigned char c : text) {
    if (is_token_char(c)) current += static_cast<char>(std::tolower(c));
    else flush();
  }
  flush();
  return tokens;
}

std::string phrase_key(std::string_view name) {
  std::string key;
  for (const auto& t : tokenize(name)) key += (key.empty() ? "" : " ") + t;
  return key;
}

}  // namespace kwiki::detail
