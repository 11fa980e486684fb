/* kiln plugin ABI (docs/plugin-abi.md).
 *
 * A plugin is a shared library exporting one C function,
 * `kiln_plugin_entry`, that returns a static descriptor: the ABI version the
 * plugin was built against, its kind and name, and a pointer to the function
 * table of its kind. Every table starts with its own size in bytes, so a host
 * knows which functions a plugin built against an older minor version has.
 *
 * Rules of the boundary:
 * - Only the C types below cross it. No C++ exception ever does: a function
 *   that fails returns a non-zero kiln_status and fills the kiln_error it
 *   was given.
 * - Strings passed in are borrowed for the duration of the call; strings a
 *   plugin returns in a descriptor are static.
 * - The host passes its services (logging, metrics, configuration) to
 *   `create`; they stay valid for the life of the instance.
 * - The host never unloads a plugin library.
 *
 * Versioning: a host accepts a plugin whose KILN_PLUGIN_ABI_MAJOR equals its
 * own and whose minor is any value; functions added in a later minor are
 * appended to the end of a table and are optional for the host.
 */
#ifndef KILN_PLUGIN_ABI_H
#define KILN_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Incompatible changes bump the major; a host refuses any other major. */
#define KILN_PLUGIN_ABI_MAJOR 1
/** The newest minor this header describes. Minor 1 appended
 * kiln_sandbox_functions.probe; minor 2 appended kiln_sandbox_spec.
 * extra_paths and defined the platform table (systems, command); minor 3
 * appended kiln_notifier_functions.deliver; minor 4 gave evaluators their
 * table (evaluate, with kiln_eval_request and kiln_eval_sink); minor 5
 * appended kiln_sandbox_spec.cgroup_procs. */
#define KILN_PLUGIN_ABI_MINOR_LATEST 5

/** A plugin may build against an older minor by defining this before the
 * include (the tables then end where that minor's ended). */
#ifndef KILN_PLUGIN_ABI_MINOR
#define KILN_PLUGIN_ABI_MINOR KILN_PLUGIN_ABI_MINOR_LATEST
#endif

/** The symbol every plugin library exports. */
#define KILN_PLUGIN_ENTRY_SYMBOL "kiln_plugin_entry"

/** Plugin kinds (design decision 7). */
typedef enum kiln_plugin_kind {
  KILN_PLUGIN_SANDBOX = 1,   /**< isolates builders (kiln_sandbox_functions) */
  KILN_PLUGIN_PLATFORM = 2,  /**< runs builders of a system
                                (kiln_platform_functions) */
  KILN_PLUGIN_EVALUATOR = 3, /**< evaluates collections
                                (kiln_evaluator_functions) */
  KILN_PLUGIN_NOTIFIER = 4   /**< delivers build events
                                (kiln_notifier_functions) */
} kiln_plugin_kind;

/** Result of a call: 0 is success. */
typedef int32_t kiln_status;
#define KILN_OK 0
#define KILN_ERR_FAILED 1      /**< the operation failed; see the message */
#define KILN_ERR_UNSUPPORTED 2 /**< not possible on this host/configuration */
#define KILN_ERR_INVALID 3     /**< the caller passed something malformed */
#define KILN_ERR_SYSTEM 4      /**< a system call failed; see sys_errno */

/** Error details, filled by the plugin when it returns non-zero. */
typedef struct kiln_error {
  kiln_status code;
  int32_t sys_errno;    /**< errno for KILN_ERR_SYSTEM, else 0 */
  char message[1024];   /**< NUL-terminated, truncated if longer */
} kiln_error;

/** Log levels for kiln_host_services.log. */
typedef enum kiln_log_level {
  KILN_LOG_DEBUG = 0,
  KILN_LOG_INFO = 1,
  KILN_LOG_WARN = 2,
  KILN_LOG_ERROR = 3
} kiln_log_level;

/** What the host offers a plugin instance. Every function may be called
 * from any thread. */
typedef struct kiln_host_services {
  uint32_t size; /**< sizeof(kiln_host_services) of the host */
  void* ctx;     /**< passed back to every function */
  /** Logs one message, attributed to the plugin. */
  void (*log)(void* ctx, kiln_log_level level, const char* message);
  /** Adds `delta` to the counter `name` (the host prefixes it with
   * kiln_plugin_<name>_). */
  void (*metric_add)(void* ctx, const char* name, double delta);
  /** Looks up configuration key `key` of this plugin. Returns the value's
   * length (which may exceed buf_size - 1: the copy is then truncated) or
   * -1 when the key is not set. */
  int64_t (*config_get)(void* ctx, const char* key, char* buf,
                        size_t buf_size);
} kiln_host_services;

/** What kiln_plugin_entry returns. Static: valid for the life of the
 * process. */
typedef struct kiln_plugin_descriptor {
  uint32_t size;        /**< sizeof(kiln_plugin_descriptor) */
  uint16_t abi_major;   /**< KILN_PLUGIN_ABI_MAJOR */
  uint16_t abi_minor;   /**< KILN_PLUGIN_ABI_MINOR the plugin built against */
  uint32_t kind;        /**< a kiln_plugin_kind */
  const char* name;     /**< unique per kind, e.g. "linux" */
  const char* version;  /**< the plugin's own version, e.g. "1.0.0" */
  const char* summary;  /**< one line for `kiln plugins` */
  const void* functions; /**< the kind's table; starts with uint32_t size */
} kiln_plugin_descriptor;

/** Type of the exported entry point. */
typedef const kiln_plugin_descriptor* (*kiln_plugin_entry_fn)(void);

/* ---- sandbox ---------------------------------------------------------- */

/** One build as a sandbox sees it. All paths are absolute. */
typedef struct kiln_sandbox_spec {
  uint32_t size;
  const char* program;          /**< the builder, as the builder sees it */
  const char* const* argv;      /**< NULL-terminated; argv[0] included */
  const char* const* envp;      /**< "K=V", NULL-terminated, complete */
  const char* work_dir;         /**< as the builder sees it */
  uint32_t umask;
  const char* host_build_dir;   /**< the build directory on the host */
  const char* scratch_dir;      /**< where the sandbox may put per-build
                                   files; on the physical store's file
                                   system */
  const char* logical_store;    /**< e.g. "/nix/store" */
  const char* physical_store;   /**< holds the inputs; outputs go here */
  const char* const* inputs;    /**< base names of the input closure */
  const char* const* outputs;   /**< base names of the outputs */
  int32_t network;              /**< non-zero: host network (fixed output) */
#if KILN_PLUGIN_ABI_MINOR >= 2
  /** Minor 2: host paths the builder needs besides the closure (e.g. an
   * emulator a platform runs it under), NULL-terminated; shown read-only at
   * the same path. A plugin reads it only when `size` covers it. */
  const char* const* extra_paths;
#endif
#if KILN_PLUGIN_ABI_MINOR >= 5
  /** Minor 5: the build's control group, as `cgroup.procs` files (one per
   * hierarchy), NULL-terminated; NULL or empty: none. The sandbox writes
   * the builder's pid to each before the builder runs anything (so that
   * every process of the build is in the group). A plugin reads it only
   * when `size` covers it; for an older plugin the host moves the builder
   * itself once `start` returned. */
  const char* const* cgroup_procs;
#endif
} kiln_sandbox_spec;

/** A started builder. The host owns `output_fd` and reaps `pid` (a child of
 * the calling process, leader of its own session and process group); it
 * kills the build with kill(-pid, SIGKILL). */
typedef struct kiln_sandbox_process {
  uint32_t size;
  int32_t pid;       /**< in the host's PID namespace */
  int32_t output_fd; /**< read end of the merged stdout/stderr pipe */
} kiln_sandbox_process;

/** kiln_sandbox_functions.capabilities: builders see the physical store at
 * the logical directory whatever the host's layout, and finish() moves the
 * outputs into the physical store. Without it the builder writes to the
 * logical paths itself (the host then requires physical == logical). */
#define KILN_SANDBOX_MAPS_STORE 1u
/** kiln_sandbox_functions.capabilities: builds are isolated (namespaces,
 * no network, an unprivileged uid). Without it kiln warns loudly. */
#define KILN_SANDBOX_ISOLATES 2u

/** A sandbox plugin's functions. Required: everything of minor 0. */
typedef struct kiln_sandbox_functions {
  uint32_t size; /**< sizeof(kiln_sandbox_functions) the plugin built */
  uint32_t capabilities; /**< KILN_SANDBOX_* bits */
  /** Makes an instance; `host` outlives it. */
  kiln_status (*create)(const kiln_host_services* host, void** instance,
                        kiln_error* err);
  /** Frees an instance (no build of it may still run). */
  void (*destroy)(void* instance);
  /** The build directory as builders will see it, for `host_build_dir`
   * (e.g. "/build"), copied into buf. */
  kiln_status (*build_dir)(void* instance, const char* host_build_dir,
                           char* buf, size_t buf_size, kiln_error* err);
  /** Prepares the sandbox and starts the builder in it. On success `*build`
   * is the plugin's handle, to be passed to finish exactly once. A builder
   * that cannot be executed is KILN_ERR_SYSTEM with its errno. */
  kiln_status (*start)(void* instance, const kiln_sandbox_spec* spec,
                       void** build, kiln_sandbox_process* process,
                       kiln_error* err);
  /** After the host reaped the builder: moves the outputs that exist to
   * `physical_store` and releases everything of the build (files, build
   * user). */
  kiln_status (*finish)(void* instance, void* build, kiln_error* err);
#if KILN_PLUGIN_ABI_MINOR >= 1
  /** Minor 1, optional: whether the sandbox can work on this host; a
   * non-zero status says why not. */
  kiln_status (*probe)(void* instance, kiln_error* err);
#endif
} kiln_sandbox_functions;

/** Size of the minor-0 sandbox table: a shorter table is refused. */
#define KILN_SANDBOX_FUNCTIONS_MIN_SIZE \
  (offsetof(kiln_sandbox_functions, finish) + sizeof(void*))

/* ---- platform (minor 2) -----------------------------------------------
 * A platform runs builders of some systems on this host: `native` runs the
 * host's own, `qemu-user` others under an emulator. */

/** A platform plugin's functions. Required: all of them (a platform plugin
 * built against minor 0 or 1 had only create and destroy: it is refused). */
typedef struct kiln_platform_functions {
  uint32_t size;
  kiln_status (*create)(const kiln_host_services* host, void** instance,
                        kiln_error* err);
  void (*destroy)(void* instance);
  /** The systems this platform runs on this host (probed, not assumed), as
   * space-separated names ("x86_64-linux i686-linux"), copied into buf;
   * "" when it can run none here. */
  kiln_status (*systems)(void* instance, char* buf, size_t buf_size,
                         kiln_error* err);
  /** How to run `program` (a builder for `system`, as the builder sees
   * it) with argument 0 `argv0`: copies into buf the command as
   * NUL-terminated strings, the file to execute first, then its argv
   * from argument 0; the host appends the derivation's arguments. `*count`
   * is the number of strings. KILN_ERR_UNSUPPORTED when it does not run
   * `system`. */
  kiln_status (*command)(void* instance, const char* system,
                         const char* program, const char* argv0, char* buf,
                         size_t buf_size, uint32_t* count, kiln_error* err);
} kiln_platform_functions;

/** Size of the platform table: a shorter one is refused. */
#define KILN_PLATFORM_FUNCTIONS_MIN_SIZE sizeof(kiln_platform_functions)

/* ---- evaluator, notifier ------------------------------------------------
 * Both tables start with the common prefix below; the notifier's appends
 * `deliver` (minor 3), the evaluator's `evaluate` (minor 4); each table's
 * `size` tells the host what a plugin has. */

/** The prefix shared by the evaluator and notifier tables. */
typedef struct kiln_generic_functions {
  uint32_t size;
  kiln_status (*create)(const kiln_host_services* host, void** instance,
                        kiln_error* err);
  void (*destroy)(void* instance);
} kiln_generic_functions;

/* ---- evaluator (minor 4) ----------------------------------------------
 * An evaluator turns a checked-out collection into jobs whose `.drv`
 * closures are valid in kiln's central store afterwards: it either writes
 * them there itself (a program that knows kiln's store, e.g. `kiln eval
 * --state-dir`), or leaves them in a Nix chroot store and asks the host to
 * import them (`import_nix_store`). */

/** One evaluation of a jobset. All paths are absolute; strings are
 * borrowed for the call. */
typedef struct kiln_eval_request {
  uint32_t size;
  const char* jobset;          /**< its name, for messages */
  const char* collection_dir;  /**< the checked-out collection */
  const char* file;            /**< the collection's file (in the folder) */
  const char* attribute;       /**< attribute path of the jobs; "" = all */
  const char* const* arg_names; /**< NULL-terminated argument names */
  const char* const* arg_exprs; /**< their Nix expressions, as many */
  const char* state_dir;       /**< the central store's state directory */
  const char* store_dir;       /**< the logical store, e.g. "/nix/store" */
  const char* work_dir;        /**< a folder of this jobset the plugin may
                                  use across evaluations (it exists) */
} kiln_eval_request;

/** Where an evaluator reports to; valid during `evaluate` only. Both
 * functions may be called from the thread that called `evaluate` only. */
typedef struct kiln_eval_sink {
  uint32_t size;
  void* ctx; /**< passed back to every function */
  /** One job as a line of `kiln eval --json` (docs/plugin-abi.md):
   * `{"attr", "drvPath", "name", "system", "outputs", "meta"}` (name, system
   * and outputs may be left out: the host reads them from the .drv) or
   * `{"attr", "error"}`. `attr` is relative to the collection's top (the
   * request's attribute included or not). Non-zero (and `err`) when the
   * host cannot take it: the plugin then stops and returns that status. */
  kiln_status (*job)(void* ctx, const char* line, size_t len,
                     kiln_error* err);
  /** Imports the closures of `paths` (NULL-terminated, logical `.drv`
   * paths) from the Nix store whose files are under `<nix_root>/nix/store`
   * into the central store, each NAR hashed and its references scanned. */
  kiln_status (*import_nix_store)(void* ctx, const char* nix_root,
                                  const char* const* paths, kiln_error* err);
} kiln_eval_sink;

/** An evaluator plugin's functions: the common prefix, then (minor 4)
 * `evaluate`. One built against minor 0 to 3 has the prefix only: it
 * still loads and is listed, but cannot evaluate. */
typedef struct kiln_evaluator_functions {
  uint32_t size; /**< sizeof(kiln_evaluator_functions) the plugin built */
  kiln_status (*create)(const kiln_host_services* host, void** instance,
                        kiln_error* err);
  void (*destroy)(void* instance);
#if KILN_PLUGIN_ABI_MINOR >= 4
  /** Minor 4: evaluates the collection of `request`, reporting every job
   * to `sink` (a job that fails alone is an error line, not a failure).
   * Non-zero when the evaluation as a whole failed (a syntax error, a
   * missing file, a helper program that failed), with the reason in `err`.
   * Called from one host thread at a time per instance; may block. */
  kiln_status (*evaluate)(void* instance, const kiln_eval_request* request,
                          const kiln_eval_sink* sink, kiln_error* err);
#endif
} kiln_evaluator_functions;

/** Smallest evaluator table that has `evaluate` (minor 4). */
#define KILN_EVALUATOR_EVALUATE_MIN_SIZE \
  (offsetof(kiln_evaluator_functions, destroy) + 2 * sizeof(void*))

/* ---- notifier ---------------------------------------------------------- */

/** A notifier plugin's functions: the common prefix, then (minor 3)
 * `deliver`. A notifier built against minor 0 to 2 has the prefix only:
 * it still loads and is listed, but kiln cannot deliver through it. */
typedef struct kiln_notifier_functions {
  uint32_t size; /**< sizeof(kiln_notifier_functions) the plugin built */
  kiln_status (*create)(const kiln_host_services* host, void** instance,
                        kiln_error* err);
  void (*destroy)(void* instance);
#if KILN_PLUGIN_ABI_MINOR >= 3
  /** Minor 3: delivers one event. `event` names its kind (e.g.
   * "build.finished"), `body` is its JSON (`body_len` bytes, also
   * NUL-terminated). Returns once the receiver accepted it (KILN_OK) or
   * did not (non-zero: the host retries later, with backoff). Called from
   * one host thread, one event at a time; it may block, bounded by the
   * plugin's own time limit. */
  kiln_status (*deliver)(void* instance, const char* event, const char* body,
                         size_t body_len, kiln_error* err);
#endif
} kiln_notifier_functions;

/** Smallest notifier table that has `deliver` (minor 3). */
#define KILN_NOTIFIER_DELIVER_MIN_SIZE \
  (offsetof(kiln_notifier_functions, destroy) + 2 * sizeof(void*))

/** Minimum table size of the evaluator and notifier kinds. */
#define KILN_GENERIC_FUNCTIONS_MIN_SIZE sizeof(kiln_generic_functions)

#ifdef __cplusplus
}
#endif

#endif /* KILN_PLUGIN_ABI_H */
