// Reading back the Chrome trace JSON of runtime/trace.h in tests: complete ("X") events counted
// by (category, lane name), over every process. It reads the recorder's layout (one event per
// line); IsValidJson (json_check.h) checks the syntax separately.
#ifndef FERRY_TESTS_TESTING_TRACE_JSON_H_
#define FERRY_TESTS_TESTING_TRACE_JSON_H_

#include <cstdio>
#include <map>
#include <string>
#include <utility>

namespace ferry::testing {

// The whole file at `path` ("" when it cannot be read).
inline std::string ReadTextFile(const std::string& path) {
  std::string text;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

inline std::map<std::pair<std::string, std::string>, int> CountTraceEvents(
    const std::string& json) {
  std::map<std::pair<int, int>, std::string> lanes;  // (pid, tid) -> name
  std::map<std::pair<std::string, std::string>, int> counts;
  size_t at = 0;
  while ((at = json.find("{\"ph\": ", at)) != std::string::npos) {
    const size_t end = json.find('\n', at);
    const std::string line = json.substr(at, end - at);
    at = end;
    auto field = [&](const std::string& key) {
      size_t k = line.find("\"" + key + "\": ");
      if (k == std::string::npos) return std::string();
      k += key.size() + 4;
      if (line[k] == '"') return line.substr(k + 1, line.find('"', k + 1) - k - 1);
      return line.substr(k, line.find_first_of(",}", k) - k);
    };
    if (line.find("\"thread_name\"") != std::string::npos) {
      const size_t n = line.find("\"args\": {\"name\": \"") + 18;
      lanes[{std::stoi(field("pid")), std::stoi(field("tid"))}] =
          line.substr(n, line.find('"', n) - n);
    } else if (line.find("\"ph\": \"X\"") != std::string::npos) {
      ++counts[{field("cat"), lanes[{std::stoi(field("pid")), std::stoi(field("tid"))}]}];
    }
  }
  return counts;
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_TRACE_JSON_H_
