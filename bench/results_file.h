#pragma once

// What every benchmark reads and writes beside its table: the machine it ran on, the table itself
// between two markers of a results file (the README, docs/benchmarks.md, bench/RESULTS.md), and
// the project's SQL files it loads.

#include <string>

namespace pgoutbox::bench {

// Replaces the text between `begin_marker` and `end_marker` in `path` (or appends the markers
// and the text when the file has none).
void write_between_markers(const std::string& path, const std::string& text, const std::string& begin_marker,
                           const std::string& end_marker);
// The whole file; throws naming it when it cannot be read.
std::string read_file(const std::string& path);
// CPU model, cores, memory, kernel, from /proc.
std::string describe_machine();
// "1.23 0.80 0.52": the load averages over 1, 5 and 15 minutes.
std::string load_average();

}  // namespace pgoutbox::bench
