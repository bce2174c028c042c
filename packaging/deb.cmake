# The Debian package, built by scripts/package.sh: CPack's DEB generator packs what the
# install rules in CMakeLists.txt install, so the file layout has one home. The version
# comes from project(); the maintainer and the package changelog from packaging/changelog,
# whose newest entry must name that version. Depends: dpkg-shlibdeps derives the shared
# libraries (fuse3's, the codecs', xxhash); fuse3 itself is listed for fusermount3.
set(CBFS_CHANGELOG ${CMAKE_SOURCE_DIR}/packaging/changelog)
foreach(field Version Maintainer)
  execute_process(COMMAND dpkg-parsechangelog -l ${CBFS_CHANGELOG} -S ${field}
                  OUTPUT_VARIABLE CBFS_CHANGELOG_${field} OUTPUT_STRIP_TRAILING_WHITESPACE
                  COMMAND_ERROR_IS_FATAL ANY)
endforeach()
if(NOT CBFS_CHANGELOG_Version STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "packaging/changelog's newest entry is ${CBFS_CHANGELOG_Version} but "
          "project() says ${PROJECT_VERSION}: add an entry for ${PROJECT_VERSION} "
          "(dch -c packaging/changelog -v ${PROJECT_VERSION})")
endif()

# Debian's place for a native package's changelog and its copyright file.
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/packaging)
execute_process(COMMAND gzip -9nc ${CBFS_CHANGELOG}
                OUTPUT_FILE ${CMAKE_BINARY_DIR}/packaging/changelog.gz COMMAND_ERROR_IS_FATAL ANY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/changelog.gz packaging/copyright
        DESTINATION share/doc/cbfs)

# The package's version is project()'s plus the commit, so that every build from a
# later commit is a newer package: with the plain version, `apt-get install
# ./cbfs_*.deb` of a rebuild answered "already the newest version" and kept the old
# daemon. 0.1.0 < 0.1.0+git245.g1a2b3c4 < 0.1.0+git246.g... < 0.2.0 in dpkg's order.
# Outside a git checkout (a source tarball) the plain version stays.
execute_process(COMMAND git -C ${CMAKE_SOURCE_DIR} rev-list --count HEAD
                OUTPUT_VARIABLE CBFS_GIT_COUNT OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE CBFS_GIT_RC1 ERROR_QUIET)
execute_process(COMMAND git -C ${CMAKE_SOURCE_DIR} rev-parse --short=7 HEAD
                OUTPUT_VARIABLE CBFS_GIT_SHA OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE CBFS_GIT_RC2 ERROR_QUIET)
if(CBFS_GIT_RC1 EQUAL 0 AND CBFS_GIT_RC2 EQUAL 0 AND CBFS_GIT_COUNT MATCHES "^[0-9]+$")
  set(CPACK_DEBIAN_PACKAGE_VERSION "${PROJECT_VERSION}+git${CBFS_GIT_COUNT}.g${CBFS_GIT_SHA}")
else()
  set(CPACK_DEBIAN_PACKAGE_VERSION "${PROJECT_VERSION}")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cbfs)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # cbfs_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CBFS_CHANGELOG_Maintainer}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "fuse3")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "gnuplot-nox, prometheus-node-exporter")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "compressed backup file system (FUSE)")
# The extended description; CPack indents it and writes an empty line as " .".
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "cbfs is a directory that backup tools write to unchanged (RMAN,
pg_basebackup, mariadb-backup, tar, dd): it cuts every file into blocks,
compresses them in parallel with lz4, zstd, xz or bzip2 and keeps them in a
plain directory tree with a checksum per block. Restores read the same paths
back.

This package holds the daemon and mount helper (mount -t cbfs, fstab types
cbfs and fuse.cbfs), the cbfs tool (stat, verify, cat, fsck, stats with
Prometheus output) and examples for fstab, systemd and monitoring.")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
include(CPack)
