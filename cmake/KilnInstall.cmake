# What `cmake --install` puts where, besides the targets (bin/kiln from
# cli/, lib/kiln/plugins from plugins/, man pages from cli/), and the
# Debian package `cpack -G DEB` makes of it (docs/operations.md,
# "Installing").

install(FILES README.md DESTINATION share/doc/kiln)
install(DIRECTORY docs/ DESTINATION share/doc/kiln FILES_MATCHING PATTERN "*.md")
install(DIRECTORY examples/ DESTINATION share/doc/kiln/examples)
install(FILES contrib/bash-completion/kiln
  DESTINATION share/bash-completion/completions)

# The units name the installed binary, so they are written at install time,
# when the final prefix is known (cpack installs into /usr, not the
# configured CMAKE_INSTALL_PREFIX).
foreach(_unit kiln-scheduler kiln-worker)
  install(CODE "
    set(_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\")
    set(KILN_BIN \"\${CMAKE_INSTALL_PREFIX}/bin/kiln\")
    configure_file(\"${PROJECT_SOURCE_DIR}/contrib/systemd/${_unit}.service.in\"
                   \"\${_dir}/${_unit}.service\" @ONLY)
    message(STATUS \"Installing: \${_dir}/${_unit}.service\")
    list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${_dir}/${_unit}.service\")")
endforeach()

set(CPACK_PACKAGE_NAME kiln)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "kiln maintainers <kiln@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "build farm for Nix package collections")
set(CPACK_PACKAGE_DESCRIPTION
  "kiln evaluates package collections written in the Nix language, schedules\n\
their derivations on workers connected over ZeroMQ, builds them in a\n\
sandbox and keeps the outputs in a store that Nix clients substitute from.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The shared libraries' packages come from dpkg-shlibdeps, except those
# kiln loads on first use (kiln/common/lazy_library.h), which it cannot
# see: libcurl, libpq, libzmq. The rest are what postinst and the plugins
# run.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, libcurl4, libpq5, libzmq5")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "qemu-user-static")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "nix-bin")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/contrib/debian/postinst
  ${PROJECT_SOURCE_DIR}/contrib/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_GENERATOR DEB)
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_IGNORE_FILES "/build/" "/\\\\.git/" "/\\\\.kiln-state/")
include(CPack)
