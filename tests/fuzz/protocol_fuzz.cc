// libFuzzer target for the scheduler <-> worker message decoder: the input
// is split into frames at "\xff\xfe"; any frames must decode or raise a
// FormatError (VersionMismatch included), and a decoded message encodes to
// frames that decode to an equal message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_input.h"
#include "kiln/common/error.h"
#include "kiln/protocol/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::protocol::Frames frames =
      kiln::fuzz::splitInput(data, size, "\xff\xfe", 8);
  kiln::protocol::Message msg;
  try {
    msg = kiln::protocol::decode(frames);
  } catch (const kiln::FormatError&) {
    return 0;
  }
  kiln::protocol::Frames again;
  try {
    again = kiln::protocol::encode(msg);
  } catch (const kiln::Error&) {
    std::abort();  // the decoder accepted what the encoder refuses
  }
  if (!(kiln::protocol::decode(again) == msg)) std::abort();
  return 0;
}
