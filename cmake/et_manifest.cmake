# et-manifest: the runtime manifest (tools/et_manifest.cpp, tools/runtime_manifest.h): the
# kernels with their dtypes, the backends, the .pte schema versions and the payload header
# format this build's runtime reads, as JSON. Included from the root CMakeLists.txt after the
# runtime, kernel, backend and extension targets.
#
# Every build writes <build>/runtime-manifest.json with it (a post-build step, so the file is
# rewritten whenever a kernel or backend library changes) and installs it next to the Python
# extension (etmlir/runtime-manifest.json: etmlir.runtime.shipped_manifest_path()). A selective
# build (ETMLIR_SELECTED_OPERATORS, cmake/et_run.cmake) also gets et-manifest-selected and
# <build>/runtime-manifest-selected.json: the manifest of et-run-selected.

# The JSON writer, shared by et-manifest and the Python extension (etmlir.runtime.manifest()).
add_library(etmlir_manifest STATIC ${CMAKE_CURRENT_SOURCE_DIR}/tools/runtime_manifest.cpp)
target_include_directories(etmlir_manifest PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/tools)
target_link_libraries(etmlir_manifest PUBLIC etmlir_runtime PRIVATE etmlir_runtime_options)

function(etmlir_add_et_manifest target kernels json)
  add_executable(${target} ${CMAKE_CURRENT_SOURCE_DIR}/tools/et_manifest.cpp)
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tools)
  target_link_libraries(${target} PRIVATE etmlir_manifest ${kernels} etmlir_backends etmlir_runtime
                        etmlir_runtime_options)
  target_link_options(${target} PRIVATE -Wl,--gc-sections)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND $<TARGET_FILE:${target}> --output ${json}
    COMMENT "Writing the runtime manifest ${json}"
    VERBATIM)
endfunction()

set(ETMLIR_RUNTIME_MANIFEST ${CMAKE_BINARY_DIR}/runtime-manifest.json)
etmlir_add_et_manifest(et-manifest etmlir_portable_kernels ${ETMLIR_RUNTIME_MANIFEST})

if(TARGET _runtime)
  target_link_libraries(_runtime PRIVATE etmlir_manifest)
endif()

if(DEFINED SKBUILD_SCRIPTS_DIR)
  install(TARGETS et-manifest DESTINATION ${SKBUILD_SCRIPTS_DIR})
  install(FILES ${ETMLIR_RUNTIME_MANIFEST} DESTINATION etmlir)
else()
  install(TARGETS et-manifest)
  install(FILES ${ETMLIR_RUNTIME_MANIFEST} DESTINATION share/etmlir)
endif()

if(TARGET etmlir_portable_kernels_selected)
  etmlir_add_et_manifest(et-manifest-selected etmlir_portable_kernels_selected
                         ${CMAKE_BINARY_DIR}/runtime-manifest-selected.json)
endif()
