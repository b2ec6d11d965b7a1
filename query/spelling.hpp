// Spelling: a request's typos of the lexicon's words, read as those words and reported.
#pragma once

#include <string>
#include <vector>

#include "kwiki/intent.hpp"
#include "lexicon.hpp"

namespace kwiki::detail {

class Retriever;

/// One word the request was read as another.
struct SpellingFix {
  std::string word;     ///< as the request spelled it (lowercased)
  std::string read_as;  ///< the lexicon's word
};

/// The request with its typos corrected, and what changed.
struct SpellingResult {
  std::string text;  ///< the request, each corrected word replaced where it stands as a whole word
  std::vector<SpellingFix> fixes;
};

/// Corrects the words of `intent.free_terms` that are typos of a lexicon word (operators,
/// products, frameworks, symptoms: Lexicon::nearest_word). Never rewrites a word the corpus
/// knows (`retriever.knows_word`), one the lexicon knows (a phrase, stopword or synonym), nor a
/// word with digits or punctuation (an identifier, a shape); never corrects toward an indexed
/// word, whose stems are not words ("raise" is indexed as "rais"). Deterministic.
SpellingResult correct_spelling(const std::string& text, const Intent& intent, Retriever& retriever, const Lexicon& lexicon);

/// The note that reports a fix: spelling: read "rmsnrom" as "rmsnorm".
std::string spelling_note(const SpellingFix& fix);

}  // namespace kwiki::detail
