# `cmake --install` rules: libclef (shared and static), the public headers, the `clef` tool,
# a pkg-config file (clef.pc: `pkg-config --cflags --libs clef`, `--static` for the archive)
# and a CMake package (`find_package(clef)` gives clef::clef, the shared library, and
# clef::clef_static). tests/install builds a program outside the tree against both.
include(CMakePackageConfigHelpers)

install(TARGETS clef_shared clef_public_static EXPORT clefTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS clef RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
file(GLOB CLEF_PUBLIC_HEADERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/*.h)
# clef_server.h belongs to the clef_server library of `clef serve`, which is not installed.
list(FILTER CLEF_PUBLIC_HEADERS EXCLUDE REGEX "/clef_server\\.h$")
install(FILES ${CLEF_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(CLEF_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/clef)
install(EXPORT clefTargets NAMESPACE clef:: DESTINATION ${CLEF_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/clefConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/clefConfig.cmake
                              INSTALL_DESTINATION ${CLEF_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/clefConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/clefConfig.cmake ${PROJECT_BINARY_DIR}/clefConfigVersion.cmake
        DESTINATION ${CLEF_CMAKE_DIR})

# pkg-config: the shared library needs nothing else at link time; a static link
# (`pkg-config --static`) also needs what libclef itself links. The prefix is found from the
# .pc file's own place (${pcfiledir}), so `cmake --install --prefix` anywhere works.
file(RELATIVE_PATH CLEF_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" CLEF_PC_TO_PREFIX "${CLEF_PC_TO_PREFIX}")
# A build with the CUDA backend: a static link also needs the CUDA runtime, cuBLASLt and
# libstdc++ (named by full path: the toolkit's directory is not on the linker's path).
set(CLEF_PC_CUDA_LIBS "")
if(CLEF_CUDA)
  set(CLEF_PC_CUDA_LIBS " ${CUDAToolkit_LIBRARY_DIR}/libcudart_static.a ${CUDAToolkit_LIBRARY_DIR}/libcublasLt.so -lstdc++ -ldl -lrt")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/clef.pc.in ${PROJECT_BINARY_DIR}/clef.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/clef.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
