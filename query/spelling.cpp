// Spelling: a request's typos of the lexicon's words, read as those words and reported.
#include "spelling.hpp"

#include <algorithm>
#include <cctype>

#include "retriever.hpp"

namespace kwiki::detail {
namespace {

bool letters_only(const std::string& word) {
  return std::all_of(word.begin(), word.end(), [](unsigned char c) { return std::isalpha(c) != 0; });
}

bool lexicon_knows(const Lexicon& lexicon, const std::string& word) {
  return !lexicon.lookup(word).empty() || lexicon.is_stopword(word) || lexicon.synonyms(word) != nullptr;
}

bool word_byte(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

// Replaces every whole-word occurrence of `word` (ASCII case ignored) in `text`.
std::string replace_word(const std::string& text, const std::string& word, const std::string& by) {
  std::string lowered = text;
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string out;
  std::size_t from = 0;
  for (std::size_t pos = lowered.find(word); pos != std::string::npos; pos = lowered.find(word, pos + 1)) {
    const bool starts = pos == 0 || !word_byte(static_cast<unsigned char>(lowered[pos - 1]));
    const std::size_t end = pos + word.size();
    const bool ends = end == lowered.size() || !word_byte(static_cast<unsigned char>(lowered[end]));
    if (!starts || !ends || pos < from) continue;
    out += text.substr(from, pos - from) + by;
    from = end;
  }
  return out + text.substr(from);
}

}  // namespace

SpellingResult correct_spelling(const std::string& text, const Intent& intent, Retriever& retriever, const Lexicon& lexicon) {
  SpellingResult result{text, {}};
  for (const auto& word : intent.free_terms) {
    if (word.size() < Lexicon::kMinCorrectedWord || !letters_only(word) || lexicon_knows(lexicon, word)) continue;
    if (retriever.knows_word(word)) continue;
    const std::string fixed = lexicon.nearest_word(word);
    if (fixed.empty() || fixed == word) continue;
    const std::string replaced = replace_word(result.text, word, fixed);
    if (replaced == result.text) continue;
    result.text = replaced;
    result.fixes.push_back({word, fixed});
  }
  return result;
}

std::string spelling_note(const SpellingFix& fix) { return "spelling: read \"" + fix.word + "\" as \"" + fix.read_as + "\""; }

}  // namespace kwiki::detail
