# CTest's kernels_bench_cli:smoke (tests/CMakeLists.txt): `hippo bench kernels` on a tiny shape, as a
# table and as JSON, so that it cannot rot. The JSON must parse and hold one entry per format and m,
# each checked against kernels/ref (the command fails on a mismatch). Variables: HIPPO (the binary).
cmake_minimum_required(VERSION 3.25)  # if(IN_LIST), string(JSON)
execute_process(COMMAND ${HIPPO} bench kernels --rows 40 --cols 96 --m 2 --format fp4,bf16 --threads 1
                        --repetitions 1 --min-time 0.01 --copies 1 --bandwidth-bytes 16MiB
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${HIPPO} bench kernels --rows 96 --cols 256 --m 1,3 --format all --repetitions 1
                        --min-time 0.01 --bandwidth-bytes 16MiB --json
                OUTPUT_VARIABLE report COMMAND_ERROR_IS_FATAL ANY)
message("${report}")
string(JSON n_results LENGTH "${report}" results)
if(NOT n_results EQUAL 8)
  message(FATAL_ERROR "bench kernels --json: ${n_results} results, expected 4 formats x 2 m")
endif()
foreach(key linear_isa threads l3_bytes)
  string(JSON value GET "${report}" ${key})
endforeach()
string(JSON read_bw GET "${report}" limits read_bytes_per_second)
string(JSON fma GET "${report}" limits fma_flops_per_second)
set(seen "")
math(EXPR last "${n_results} - 1")
foreach(i RANGE ${last})
  string(JSON format GET "${report}" results ${i} format)
  string(JSON m GET "${report}" results ${i} m)
  list(APPEND seen "${format}/${m}")
  foreach(key ms_per_call weight_gb_per_s gflop_per_s read_bandwidth_ratio fma_peak_ratio copies max_normalised_error)
    string(JSON value GET "${report}" results ${i} ${key})
  endforeach()
endforeach()
foreach(expected f32/1 f32/3 bf16/1 bf16/3 fp8/1 fp8/3 fp4/1 fp4/3)
  if(NOT expected IN_LIST seen)
    message(FATAL_ERROR "bench kernels --json: no result for ${expected} (got ${seen})")
  endif()
endforeach()
