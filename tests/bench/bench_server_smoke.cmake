# CTest's server_bench:smoke (tests/CMakeLists.txt): writes the tiny preset's checkpoint, then runs
# `hippo bench server` on it briefly (2 sessions x 16 tokens, 20 idle connections, a 512-token
# resume) as JSON and checks that its numbers are sane, then once as a table with a polling I/O
# thread, so that the benchmark cannot rot. Variables: HIPPO (the binary), TOKENIZER_DIR, WORK_DIR (removed and rewritten).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${HIPPO} model init --preset tiny --seed 1 --format plain --tokenizer ${TOKENIZER_DIR}
                        --out ${WORK_DIR}/tiny
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${HIPPO} --log-level warn bench server --model ${WORK_DIR}/tiny --threads 1 --sessions 2
                        --tokens 16 --connections 20 --resume-context 512 --json
                OUTPUT_VARIABLE report COMMAND_ERROR_IS_FATAL ANY)
message("${report}")
function(expect what)  # the condition follows, as separate arguments
  if(NOT (${ARGN}))
    message(FATAL_ERROR "bench server --json: ${what} (${report})")
  endif()
endfunction()
string(JSON frames GET "${report}" overhead frames_measured)
string(JSON p50 GET "${report}" overhead p50_us)
string(JSON p99 GET "${report}" overhead p99_us)
string(JSON connections GET "${report}" idle connections)
string(JSON per_connection GET "${report}" idle bytes_per_connection)
string(JSON context GET "${report}" resume context_tokens)
string(JSON cached GET "${report}" resume resume_cached_tokens)
string(JSON ttft GET "${report}" resume resume_ttft_seconds)
string(JSON floor_frames GET "${report}" overhead wake_floor frames)
expect("overhead measured no frame" ${frames} GREATER 0)
expect("overhead p50 above p99 or not positive" ${p50} GREATER 0 AND NOT ${p50} GREATER ${p99})
expect("the wake floor took ${floor_frames} samples, not 500" ${floor_frames} EQUAL 500)
expect("idle opened ${connections} connections, not 20" ${connections} EQUAL 20)
# RSS moves by whole pages; a connection costing a megabyte would be a leak, not noise.
expect("idle: ${per_connection} bytes per connection" ${per_connection} LESS 1000000)
expect("resume context ${context} is not about 512 tokens" ${context} GREATER 400)
expect("resume re-prefilled: ${cached} cached of a ${context}-token context" NOT ${cached} LESS ${context})
expect("resume time to first token ${ttft}" ${ttft} GREATER 0)
execute_process(COMMAND ${HIPPO} --log-level warn bench server --model ${WORK_DIR}/tiny --threads 1 --sessions 1
                        --tokens 4 --sections overhead --io-threads 1 --io-spin-us 1000
                OUTPUT_VARIABLE table COMMAND_ERROR_IS_FATAL ANY)
message("${table}")
string(FIND "${table}" "p99" at)
expect("the table has no p99" NOT at EQUAL -1)
file(REMOVE_RECURSE ${WORK_DIR})
