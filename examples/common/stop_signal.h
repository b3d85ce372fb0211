#pragma once

#include <chrono>

namespace shop {

// SIGINT and SIGTERM set a flag the examples' loops check; they finish the record in hand
// (or leave it uncommitted) and exit cleanly.
void install_stop_handlers();
bool stop_requested();

// Sleeps up to `duration`; returns false (early) when a stop was requested.
bool sleep_unless_stopped(std::chrono::milliseconds duration);

}  // namespace shop
