# Writes the C++ example that README.md marks with `<!-- example: NAME -->` (the ```c++ block right
# after that line) to OUT, byte for byte, so the packaging tests build what README shows.
#   cmake -DREADME=README.md -DNAME=readme_example.cc -DOUT=/tmp/readme_example.cc -P extract_example.cmake
foreach(var README NAME OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "extract_example.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ "${README}" text)
set(marker "<!-- example: ${NAME} -->")
string(FIND "${text}" "${marker}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README}: no line `${marker}` before the example's code block")
endif()
string(LENGTH "${marker}" marker_length)
math(EXPR at "${at} + ${marker_length}")
string(SUBSTRING "${text}" ${at} -1 text)

# Only blank space between the marker and the opening fence; the block ends at the first "```" line.
if(NOT text MATCHES "^[ \t\r\n]*```c\\+\\+\n")
  message(FATAL_ERROR "${README}: `${marker}` is not followed by a ```c++ code block")
endif()
string(LENGTH "${CMAKE_MATCH_0}" fence_length)
string(SUBSTRING "${text}" ${fence_length} -1 text)
string(FIND "${text}" "\n```" end)
if(end EQUAL -1)
  message(FATAL_ERROR "${README}: the code block after `${marker}` is not closed")
endif()
math(EXPR end "${end} + 1")  # keep the last line's newline
string(SUBSTRING "${text}" 0 ${end} code)
file(WRITE "${OUT}" "${code}")
