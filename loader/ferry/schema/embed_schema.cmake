# cmake -DIN=program.fbs -DOUT=program_schema_text.cc -P embed_schema.cmake
# Writes a C++ source defining ferry::internal::kProgramSchemaText, the schema's text, which the
# JSON form of programs needs at run time.
file(READ ${IN} text)
string(FIND "${text}" ")ferry_schema\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )ferry_schema\"")
endif()
file(WRITE ${OUT}.tmp
  "// Generated from loader/ferry/schema/program.fbs by loader/ferry/schema/embed_schema.cmake.\n"
  "namespace ferry::internal {\n"
  "extern const char kProgramSchemaText[];\n"
  "const char kProgramSchemaText[] = R\"ferry_schema(${text})ferry_schema\";\n"
  "}  // namespace ferry::internal\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
