# What `cmake --install` (make install) puts where, and the Debian packages CPack makes of it
# (make package). Two components, one package each:
#   host   gpuvm-host: dom0's programs — gpuvm-aggregator, gpuvm-dm, gpuvm-pvdrm-backend, gpuvm-vm,
#          gpuvm-ctl, gpuvm-local-hvd — in bin/, the aggregator's systemd unit and /etc/gpuvm/aggregator.conf
#          (scripts/systemd/), and the docs.
#   guest  gpuvm-guest: what a guest's CUDA programs load — libcuda.so.1 and libcudart.so.13 in a
#          directory of their own (lib/<multiarch>/gpuvm, so they never shadow NVIDIA's by accident),
#          an ld.so.conf.d entry that puts it on the guest's library path (the package's purpose),
#          and our cuda.h / cuda_runtime_api.h under include/gpuvm.
# FHS paths from GNUInstallDirs; PREFIX and DESTDIR as usual. Included last by CMakeLists.txt, so
# every target exists; a target that is not built (no libxen, the fuzz build) is left out.
include(GNUInstallDirs)

set(GPUVM_GUEST_LIBDIR ${CMAKE_INSTALL_LIBDIR}/gpuvm)

foreach(program gpuvm-aggregator gpuvm-dm gpuvm-pvdrm-backend gpuvm-vm gpuvm-ctl gpuvm-local-hvd)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT host)
  endif()
endforeach()
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT host)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT host
        PATTERN results EXCLUDE)

foreach(library gpuvm_cuda gpuvm_cudart)
  if(TARGET ${library})
    # Installed, libcudart finds libcuda.so.1 beside itself; in the build tree, in runtime/lib.
    set_target_properties(${library} PROPERTIES BUILD_RPATH "${CMAKE_BINARY_DIR}/runtime/lib"
                                                INSTALL_RPATH "\$ORIGIN")
    # The versioned file and its SONAME link; no development symlink (programs link NVIDIA's names).
    install(TARGETS ${library} LIBRARY DESTINATION ${GPUVM_GUEST_LIBDIR} COMPONENT guest
            NAMELINK_SKIP)
  endif()
endforeach()
install(FILES runtime/include/cuda.h runtime/include/cuda_runtime_api.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpuvm COMPONENT guest)
# Files for /etc: decided at install time for the prefix installed to — /etc under /usr (the
# packages), <prefix>/etc otherwise (an admin links them in if wanted). GNUInstallDirs decides at
# configure time, for the configured prefix, which is not the one CPack installs to.
# gpuvm_install_etc(SUBDIR NAME COMPONENT TEXT): writes TEXT (install-time variables escaped) there.
function(gpuvm_install_etc subdir name component text)
  install(CODE "
    if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
      set(etc_dir \"\$ENV{DESTDIR}/etc/${subdir}\")
    else()
      set(etc_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/etc/${subdir}\")
    endif()
    file(MAKE_DIRECTORY \"\${etc_dir}\")
    file(WRITE \"\${etc_dir}/${name}\" \"${text}\")
    message(STATUS \"Installing: \${etc_dir}/${name}\")
  " COMPONENT ${component})
endfunction()

# The library path entry (the prefix the libraries were installed under).
gpuvm_install_etc(ld.so.conf.d gpuvm.conf guest
  "# gpuvm-guest: gpuvm's libcuda.so.1 and libcudart.so.13\\n\${CMAKE_INSTALL_PREFIX}/${GPUVM_GUEST_LIBDIR}\\n")

# The aggregator's service and the per-domain device model's template unit in lib/systemd/system,
# the aggregator's settings in /etc/gpuvm; gpuvm-xl (Xen guests with their virtual GPU) in bin.
install(FILES scripts/systemd/gpuvm-aggregator.service scripts/systemd/gpuvm-dm@.service
        DESTINATION lib/systemd/system COMPONENT host)
install(PROGRAMS tools/gpuvm-xl/gpuvm-xl DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT host)
file(READ scripts/systemd/aggregator.conf _aggregator_conf)
string(REPLACE "\"" "\\\"" _aggregator_conf "${_aggregator_conf}")
string(REPLACE "\n" "\\n" _aggregator_conf "${_aggregator_conf}")
gpuvm_install_etc(gpuvm aggregator.conf host "${_aggregator_conf}")

# Debian packages: one per component, dependencies from dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpuvm)
set(CPACK_PACKAGE_VERSION 0.1.0)
set(CPACK_PACKAGE_CONTACT "gpuvm developers <gpuvm@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU virtualization for Xen (GPUvm design)")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL host guest)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_HOST_PACKAGE_NAME gpuvm-host)
set(CPACK_DEBIAN_HOST_DESCRIPTION
    "gpuvm dom0 programs: the GPU access aggregator, the per-VM device model, gpuvm-vm, gpuvm-ctl")
set(CPACK_DEBIAN_GUEST_PACKAGE_NAME gpuvm-guest)
set(CPACK_DEBIAN_GUEST_DESCRIPTION
    "gpuvm guest libraries: libcuda.so.1 and libcudart.so.13 for unmodified CUDA programs")
# (CPack's DEB generator runs ldconfig in the guest package's postinst/postrm itself: it installs
# shared libraries.) Packages carry stripped binaries; the build tree keeps the debug info.
set(CPACK_STRIP_FILES ON)
# What an operator edits in /etc survives upgrades: dpkg's conffiles.
file(WRITE ${CMAKE_BINARY_DIR}/deb/host/conffiles "/etc/gpuvm/aggregator.conf\n")
file(WRITE ${CMAKE_BINARY_DIR}/deb/guest/conffiles "/etc/ld.so.conf.d/gpuvm.conf\n")
# The host package's postinst creates the `gpuvm` operator group (scripts/deb/).
set(CPACK_DEBIAN_HOST_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/deb/host/conffiles
                                            ${CMAKE_SOURCE_DIR}/scripts/deb/gpuvm-host/postinst)
set(CPACK_DEBIAN_GUEST_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/deb/guest/conffiles)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
include(CPack)
