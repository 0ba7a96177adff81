# Installs fegpu from BUILD_DIR into WORK/prefix, moves the tree elsewhere
# (the package must be relocatable), then configures, builds and runs the C
# and Fortran consumer projects against it with find_package(fegpu REQUIRED).
file(REMOVE_RECURSE "${WORK}")
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()
run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK}/prefix")
file(RENAME "${WORK}/prefix" "${WORK}/moved")
foreach(lang c fortran legacy)
  run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}/${lang}" -B "${WORK}/${lang}" "-DCMAKE_PREFIX_PATH=${WORK}/moved"
      "-DCMAKE_Fortran_COMPILER=${Fortran_COMPILER}" "-DCMAKE_C_COMPILER=${C_COMPILER}")
  run("${CMAKE_COMMAND}" --build "${WORK}/${lang}")
endforeach()
foreach(exe c/c_consumer fortran/fortran_consumer legacy/legacy legacy/legacy_r8 legacy/legacy_i8)
  message(STATUS "running ${exe}")
  run("${WORK}/${exe}")
endforeach()
