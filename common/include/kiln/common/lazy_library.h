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
