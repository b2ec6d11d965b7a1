# kwiki_embed_text(OUT SYMBOL FILE): generate a C++ source defining `const char* const SYMBOL`
# (NUL-terminated) with FILE's bytes, so the binary carries its schemas and lexicon.
function(kwiki_embed_text out symbol file)
  file(READ "${file}" content HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
  file(WRITE "${out}.tmp"
    "// Generated from ${file} by cmake/EmbedText.cmake; do not edit.\n"
    "namespace kwiki::detail {\n"
    "static const unsigned char ${symbol}_bytes[] = {${bytes} 0x00};\n"
    "extern const char* const ${symbol} = reinterpret_cast<const char*>(${symbol}_bytes);\n"
    "}\n")
  configure_file("${out}.tmp" "${out}" COPYONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
endfunction()
