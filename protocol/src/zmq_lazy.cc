// The libzmq functions the protocol calls (directly and through cppzmq),
// as stubs that load libzmq on first use (kiln/common/lazy_library.h): a
// process that opens no socket (`kiln instantiate`, `kiln eval`) does not
// map libzmq and what it brings (norm, pgm, sodium, krb5: ~1.7 MB
// resident). zmq.h gives them C linkage, and the compiler checks each
// signature against it. A function cppzmq starts to use fails to link
// until it is added here.
#include <zmq.h>

#include "kiln/common/lazy_library.h"

namespace {
constexpr const char* kLibzmq = "libzmq.so.5";
}  // namespace

#define KILN_ZMQ(...) KILN_LAZY_FUNCTION(kLibzmq, __VA_ARGS__)

KILN_ZMQ(int, zmq_bind, (void* s, const char* addr), s, addr)
KILN_ZMQ(int, zmq_close, (void* s), s)
KILN_ZMQ(int, zmq_connect, (void* s, const char* addr), s, addr)
KILN_ZMQ(void*, zmq_ctx_new, (void), )
KILN_ZMQ(int, zmq_ctx_term, (void* ctx), ctx)
KILN_ZMQ(int, zmq_curve_keypair, (char* pub, char* sec), pub, sec)
KILN_ZMQ(int, zmq_curve_public, (char* pub, const char* sec), pub, sec)
KILN_ZMQ(int, zmq_errno, (void), )
KILN_ZMQ(int, zmq_getsockopt, (void* s, int option, void* value, size_t* len),
         s, option, value, len)
KILN_ZMQ(int, zmq_msg_close, (zmq_msg_t * m), m)
KILN_ZMQ(void*, zmq_msg_data, (zmq_msg_t * m), m)
KILN_ZMQ(const char*, zmq_msg_gets, (const zmq_msg_t* m, const char* property),
         m, property)
KILN_ZMQ(int, zmq_msg_init, (zmq_msg_t * m), m)
KILN_ZMQ(int, zmq_msg_more, (const zmq_msg_t* m), m)
KILN_ZMQ(int, zmq_msg_recv, (zmq_msg_t * m, void* s, int flags), m, s, flags)
KILN_ZMQ(size_t, zmq_msg_size, (const zmq_msg_t* m), m)
KILN_ZMQ(int, zmq_poll, (zmq_pollitem_t * items, int n, long timeout), items, n,
         timeout)
KILN_ZMQ(int, zmq_send, (void* s, const void* buf, size_t len, int flags), s,
         buf, len, flags)
KILN_ZMQ(int, zmq_setsockopt,
         (void* s, int option, const void* value, size_t len), s, option, value,
         len)
KILN_ZMQ(void*, zmq_socket, (void* ctx, int type), ctx, type)
KILN_ZMQ(int, zmq_socket_monitor, (void* s, const char* addr, int events), s,
         addr, events)
KILN_ZMQ(const char*, zmq_strerror, (int errnum), errnum)
KILN_ZMQ(char*, zmq_z85_encode, (char* dest, const uint8_t* data, size_t size),
         dest, data, size)
