/* Malformed or unusual plugins for the loader's tests, written against the
 * bare C header. RAW_CASE selects one:
 *   1 a different ABI major     2 an unknown kind
 *   3 a sandbox table missing start (null)
 *   4 a sandbox table too short (ends before finish)
 *   5 a notifier (the generic table)  6 no entry point at all
 */
#include "kiln/plugin/abi.h"

__attribute__((unused)) static kiln_status create(const kiln_host_services* host, void** instance,
                          kiln_error* err) {
  (void)host;
  (void)err;
  *instance = 0;
  return KILN_OK;
}
__attribute__((unused)) static void destroy(void* instance) { (void)instance; }
__attribute__((unused)) static kiln_status build_dir(void* i, const char* h, char* b, size_t n,
                             kiln_error* e) {
  (void)i, (void)h, (void)b, (void)n, (void)e;
  return KILN_ERR_FAILED;
}

#if RAW_CASE == 6
int not_a_plugin = 1;
#else
#if RAW_CASE == 5
static const kiln_generic_functions functions = {
    sizeof(kiln_generic_functions), create, destroy};
#define KIND KILN_PLUGIN_NOTIFIER
#else
static const kiln_sandbox_functions functions = {
#if RAW_CASE == 4
    offsetof(kiln_sandbox_functions, start),
#else
    sizeof(kiln_sandbox_functions),
#endif
    0, create, destroy, build_dir, 0, 0
#if KILN_PLUGIN_ABI_MINOR >= 1
    , 0
#endif
};
#if RAW_CASE == 2
#define KIND 99
#else
#define KIND KILN_PLUGIN_SANDBOX
#endif
#endif

static const kiln_plugin_descriptor descriptor = {
    sizeof(kiln_plugin_descriptor),
#if RAW_CASE == 1
    KILN_PLUGIN_ABI_MAJOR + 1,
#else
    KILN_PLUGIN_ABI_MAJOR,
#endif
    KILN_PLUGIN_ABI_MINOR, KIND, RAW_NAME, "0.0.1", "a raw test plugin",
    &functions};

__attribute__((visibility("default"))) const kiln_plugin_descriptor*
kiln_plugin_entry(void) {
  return &descriptor;
}
#endif
