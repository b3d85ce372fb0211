#include "results_file.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace pgoutbox::bench {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_between_markers(const std::string& path, const std::string& text, const std::string& begin_marker,
                           const std::string& end_marker) {
  std::string content;
  {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    content = buffer.str();
  }
  const auto begin = content.find(begin_marker);
  const auto end = content.find(end_marker);
  const std::string block = fmt::format("{}\n{}{}", begin_marker, text, end_marker);
  if (begin == std::string::npos || end == std::string::npos || end < begin) {
    content += (content.empty() ? "" : "\n") + block + "\n";
  } else {
    content.replace(begin, end + end_marker.size() - begin, block);
  }
  std::ofstream out(path, std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return fmt::format("{} {} {}", one, five, fifteen);
}

std::string describe_machine() {
  std::string model = "unknown CPU";
  long mem_kib = 0;
  {
    std::ifstream cpu("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpu, line)) {
      if (line.rfind("model name", 0) == 0) {
        model = line.substr(line.find(':') + 2);
        break;
      }
    }
    std::ifstream mem("/proc/meminfo");
    while (std::getline(mem, line)) {
      if (line.rfind("MemTotal:", 0) == 0) mem_kib = std::stol(line.substr(9));
    }
  }
  utsname uts{};
  ::uname(&uts);
  return fmt::format(
      "{} × {}, {:.0f} GiB RAM, Linux {} ({}); Postgres, Kafka, the workload and the contenders share the "
      "cores",
      ::sysconf(_SC_NPROCESSORS_ONLN), model, static_cast<double>(mem_kib) / (1024.0 * 1024.0), uts.release,
      uts.machine);
}

}  // namespace pgoutbox::bench
