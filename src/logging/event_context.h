#pragma once

// The fields of the event being logged on this thread, for the formatter: spdlog's log_msg has
// no room for structured fields, and pgoutbox's loggers are synchronous, so the formatter runs
// inside event()'s call on the same thread.

#include "pgoutbox/logging/logging.h"

namespace pgoutbox::logging::detail {

const EventFields* current_fields();

class FieldsScope {
 public:
  explicit FieldsScope(const EventFields& fields);
  ~FieldsScope();
  FieldsScope(const FieldsScope&) = delete;
  FieldsScope& operator=(const FieldsScope&) = delete;

 private:
  const EventFields* previous_;
};

}  // namespace pgoutbox::logging::detail
