#pragma once
/// Step tracing for finding where time goes between build steps. Off
/// unless the environment names a file: `KILN_TRACE=FILE` (read once, at
/// the first event). Each event appends one line
/// `<wall ms, 3 decimals>\t<component>\t<event>\t<step id>\t<detail>` under
/// a lock, so the scheduler and the workers of one `kiln build` (threads of
/// one process) or of several processes (O_APPEND) share one file;
/// bench/step_trace.sh turns it into per-phase times. A file that cannot
/// be opened disables tracing with one warning; tracing never throws.

#include <cstdint>
#include <string_view>

namespace kiln {

/// Whether KILN_TRACE named a file that could be opened.
bool traceEnabled();
/// Appends one event line if tracing is on; cheap when it is off.
void traceEvent(std::string_view component, std::string_view event,
                uint64_t step, std::string_view detail = {});

}  // namespace kiln
