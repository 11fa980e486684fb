#pragma once
/// Shared libraries loaded on first use instead of at start.
///
/// libcurl (S3 caches) and libpq (PostgreSQL state) bring in gnutls,
/// p11-kit, krb5, ldap, nettle and more: ~3.4 MB resident in every kiln
/// process, though most (`kiln instantiate`, workers, builders) never call
/// them. Their modules define the functions they use as stubs that look
/// each one up here on its first call (store/src/curl_lazy.cc,
/// scheduler/state/src/pq_lazy.cc), and do not link the libraries.

namespace kiln {

/// The address of `symbol` in the shared library `soname`, which is
/// opened (dlopen) on the first call for it and stays loaded. Throws
/// Error when the library or the symbol is missing.
void* lazySymbol(const char* soname, const char* symbol);

/// `symbol` of `soname` as a pointer to F (a function type's pointer).
template <class F>
F lazyFunction(const char* soname, const char* symbol) {
  return reinterpret_cast<F>(lazySymbol(soname, symbol));
}

}  // namespace kiln

/// Defines `ret name params`, a C function `soname` declares, as a stub
/// that looks the library's own `name` up on its first call and calls it
/// with the arguments after `params` (the parameters' names).
#define KILN_LAZY_FUNCTION(soname, ret, name, params, ...)    \
  ret name params {                                           \
    static const auto fn_ =                                   \
        ::kiln::lazyFunction<decltype(&name)>(soname, #name); \
    return fn_(__VA_ARGS__);                                  \
  }
