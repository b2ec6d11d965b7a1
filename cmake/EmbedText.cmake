# kwiki_embed_text(OUT SYMBOL FILE): generate a C++ source defining `extern const char SYMBOL[]`
# with FILE's bytes, so the binary carries its schemas and lexicons without a data path.
function(kwiki_embed_text out symbol file)
  file(READ "${file}" content HEX)
  string(LENGTH "${content}" hex_len)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
  file(WRITE "${out}.tmp"
    "// Generated from ${file} by cmake/EmbedText.cmake; do not edit.\n"
    "namespace kwiki::detail { extern const char ${symbol}[] = {${bytes} 0x00}; }\n")
  configure_file("${out}.tmp" "${out}" COPYONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
endfunction()
