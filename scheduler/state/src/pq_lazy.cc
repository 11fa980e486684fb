// The libpq functions the state layer calls, as stubs that load libpq on
// first use (kiln/common/lazy_library.h): a process that never opens a
// PostgreSQL database does not map libpq and what it brings (krb5, ldap,
// gnutls). The declarations in libpq-fe.h give them C linkage, and the
// compiler checks each signature against them.
#include <libpq-fe.h>

#include "kiln/common/lazy_library.h"

namespace {
constexpr const char* kLibpq = "libpq.so.5";
}  // namespace

#define KILN_PQ(...) KILN_LAZY_FUNCTION(kLibpq, __VA_ARGS__)

KILN_PQ(int, PQcancel, (PGcancel * c, char* buf, int n), c, buf, n)
KILN_PQ(void, PQclear, (PGresult * r), r)
KILN_PQ(char*, PQcmdTuples, (PGresult * r), r)
KILN_PQ(PGconn*, PQconnectdbParams,
        (const char* const* k, const char* const* v, int e), k, v, e)
KILN_PQ(void, PQconninfoFree, (PQconninfoOption * o), o)
KILN_PQ(PQconninfoOption*, PQconninfoParse, (const char* s, char** err), s, err)
KILN_PQ(int, PQconsumeInput, (PGconn * c), c)
KILN_PQ(int, PQenterPipelineMode, (PGconn * c), c)
KILN_PQ(char*, PQerrorMessage, (const PGconn* c), c)
KILN_PQ(char*, PQescapeIdentifier, (PGconn * c, const char* s, size_t n), c, s,
        n)
KILN_PQ(PGresult*, PQexec, (PGconn * c, const char* q), c, q)
KILN_PQ(int, PQexitPipelineMode, (PGconn * c), c)
KILN_PQ(void, PQfinish, (PGconn * c), c)
KILN_PQ(int, PQflush, (PGconn * c), c)
KILN_PQ(void, PQfreeCancel, (PGcancel * c), c)
KILN_PQ(void, PQfreemem, (void* p), p)
KILN_PQ(PGcancel*, PQgetCancel, (PGconn * c), c)
KILN_PQ(PGresult*, PQgetResult, (PGconn * c), c)
KILN_PQ(int, PQgetisnull, (const PGresult* r, int t, int f), r, t, f)
KILN_PQ(int, PQgetlength, (const PGresult* r, int t, int f), r, t, f)
KILN_PQ(char*, PQgetvalue, (const PGresult* r, int t, int f), r, t, f)
KILN_PQ(int, PQisBusy, (PGconn * c), c)
KILN_PQ(int, PQnfields, (const PGresult* r), r)
KILN_PQ(PGnotify*, PQnotifies, (PGconn * c), c)
KILN_PQ(int, PQntuples, (const PGresult* r), r)
KILN_PQ(int, PQpipelineSync, (PGconn * c), c)
KILN_PQ(char*, PQresultErrorField, (const PGresult* r, int code), r, code)
KILN_PQ(char*, PQresultErrorMessage, (const PGresult* r), r)
KILN_PQ(ExecStatusType, PQresultStatus, (const PGresult* r), r)
KILN_PQ(int, PQsendFlushRequest, (PGconn * c), c)
KILN_PQ(int, PQsendPrepare,
        (PGconn * c, const char* name, const char* q, int n, const Oid* types),
        c, name, q, n, types)
KILN_PQ(int, PQsendQuery, (PGconn * c, const char* q), c, q)
KILN_PQ(int, PQsendQueryParams,
        (PGconn * c, const char* q, int n, const Oid* types,
         const char* const* values, const int* lengths, const int* formats,
         int resultFormat),
        c, q, n, types, values, lengths, formats, resultFormat)
KILN_PQ(int, PQsendQueryPrepared,
        (PGconn * c, const char* name, int n, const char* const* values,
         const int* lengths, const int* formats, int resultFormat),
        c, name, n, values, lengths, formats, resultFormat)
KILN_PQ(PQnoticeProcessor, PQsetNoticeProcessor,
        (PGconn * c, PQnoticeProcessor p, void* arg), c, p, arg)
KILN_PQ(int, PQsetnonblocking, (PGconn * c, int arg), c, arg)
KILN_PQ(int, PQsocket, (const PGconn* c), c)
KILN_PQ(ConnStatusType, PQstatus, (const PGconn* c), c)
KILN_PQ(unsigned char*, PQunescapeBytea, (const unsigned char* s, size_t* n), s,
        n)
