# CTest package.find_package (cmake -P): the installed CMake package works for a consumer and
# pushes none of the library's own build flags onto it, and every place reports one version.
#   -DBUILD_DIR=<ladder build> -DSOURCE_DIR=<repository> -DWORK_DIR=<scratch> -DVERSION=<project()>
#   -DGENERATOR=<cmake generator> -DCXX=<C++ compiler>
# Steps: install (components dev and cli) into WORK_DIR/prefix; the installed headers are exactly
# include/ladder/** plus the generated version.hpp; configure, build and run tests/package
# against the prefix; read the consumer's compile command; compare `ladder --version`.

foreach(var BUILD_DIR SOURCE_DIR WORK_DIR VERSION GENERATOR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_package.cmake needs -D${var}=...")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " line "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${line}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")

# ---- install -------------------------------------------------------------------------------
foreach(component dev cli)
  run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" --component ${component})
endforeach()
file(GLOB_RECURSE source_headers RELATIVE "${SOURCE_DIR}/include" "${SOURCE_DIR}/include/ladder/*")
file(GLOB_RECURSE installed_headers RELATIVE "${prefix}/include" "${prefix}/include/*")
list(APPEND source_headers ladder/version.hpp)
list(SORT source_headers)
list(SORT installed_headers)
if(NOT source_headers STREQUAL installed_headers)
  message(FATAL_ERROR "installed headers differ from include/ladder/** + version.hpp:\n"
                      "installed: ${installed_headers}\nexpected:  ${source_headers}")
endif()
foreach(file lib/libladder.a lib/cmake/ladder/ladderConfig.cmake lib/cmake/ladder/ladderConfigVersion.cmake
             lib/cmake/ladder/ladderTargets.cmake bin/ladder)
  if(NOT EXISTS "${prefix}/${file}")
    message(FATAL_ERROR "not installed: ${file}")
  endif()
endforeach()

# ---- the consumer --------------------------------------------------------------------------
set(consumer "${WORK_DIR}/consumer")
# Only this prefix may provide ladder: no package registry, no system prefix that could hold
# another install.
run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/package" -B "${consumer}" -G "${GENERATOR}"
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
file(STRINGS "${consumer}/CMakeCache.txt" found REGEX "^ladder_DIR:")
if(NOT found STREQUAL "ladder_DIR:PATH=${prefix}/lib/cmake/ladder")
  message(FATAL_ERROR "find_package found another ladder: ${found}")
endif()
run("${CMAKE_COMMAND}" --build "${consumer}")
run("${consumer}/consumer")
message(STATUS "consumer:\n${run_output}")
if(NOT run_output MATCHES "^ladder ${VERSION}\n" OR NOT run_output MATCHES "\nPASS\n$")
  message(FATAL_ERROR "the consumer did not report ladder ${VERSION} and PASS:\n${run_output}")
endif()

# ---- flags: the consumer's compile command holds none of the library's own -------------------
file(READ "${consumer}/compile_commands.json" commands)
string(JSON count LENGTH "${commands}")
if(NOT count EQUAL 1)
  message(FATAL_ERROR "expected one compile command (consumer.cpp), found ${count}")
endif()
string(JSON command GET "${commands}" 0 command)
# The check reads the right command: it must name the installed include directory.
string(FIND "${command}" "${prefix}/include" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the consumer's compile command does not use ${prefix}/include:\n${command}")
endif()
set(forbidden -mavx2 -mfma -mf16c -ffp-contract --fmad -Wall -Wextra -fsanitize FMT_HEADER_ONLY LADDER_HAS_CUDA
              "${SOURCE_DIR}/src" "${SOURCE_DIR}/include" "${BUILD_DIR}/generated")
foreach(flag IN LISTS forbidden)
  string(FIND "${command}" "${flag}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "the consumer's compile command carries '${flag}' from ladder's build:\n${command}")
  endif()
endforeach()

# ---- one version: the CLI says what the headers and the package say --------------------------
run("${prefix}/bin/ladder" --version)
string(STRIP "${run_output}" cli_version)
if(NOT cli_version STREQUAL "ladder ${VERSION}")
  message(FATAL_ERROR "`ladder --version` says '${cli_version}', the project ${VERSION}")
endif()
message(STATUS "package, headers and CLI agree: ${VERSION}; consumer compiled without ladder's flags")
