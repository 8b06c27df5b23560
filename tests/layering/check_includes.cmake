# The dependency direction core <- devices <- engine <- tools (README, "Architecture"): no file of
# a device (src/cpu, src/cuda, src/nocuda, include/ladder/cpu, include/ladder/cuda/cuda_backend.hpp)
# and no core file includes the engine (src/engine/*, ladder/engine.hpp, ladder/attention.hpp,
# ladder/cuda_engine.hpp). Run: cmake -DROOT=<repo> -P check_includes.cmake
file(GLOB_RECURSE lower
  "${ROOT}/src/core/*" "${ROOT}/src/cpu/*" "${ROOT}/src/cuda/*" "${ROOT}/src/nocuda/*"
  "${ROOT}/include/ladder/cpu/*")
list(APPEND lower "${ROOT}/include/ladder/cuda/cuda_backend.hpp" "${ROOT}/include/ladder/device_api.hpp")
set(engine_headers "engine/" "ladder/engine.hpp" "ladder/cuda_engine.hpp")
set(bad "")
foreach(f IN LISTS lower)
  file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS lines)
    foreach(h IN LISTS engine_headers)
      string(FIND "${line}" "\"${h}" at)
      if(NOT at EQUAL -1)
        list(APPEND bad "${f}: ${line}")
      endif()
    endforeach()
  endforeach()
endforeach()
# The single-layer entry point (attention.hpp) belongs to the engine layer too, except its
# device-neutral LayerIO, which lives in device_api.hpp.
foreach(f IN LISTS lower)
  file(STRINGS "${f}" lines REGEX "#[ \t]*include[ \t]*\"ladder/attention.hpp\"")
  if(lines)
    list(APPEND bad "${f}: ${lines}")
  endif()
endforeach()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "device or core code includes the engine layer:\n  ${text}")
endif()
list(LENGTH lower n)
message(STATUS "include direction holds over ${n} files")
