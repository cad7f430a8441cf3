# CTest's model_bench:smoke (tests/CMakeLists.txt): writes the tiny preset's checkpoint, then runs
# `hippo bench model` on it briefly, as a table and as JSON, with the encoder/decoder plan compared
# at 1,000 tokens (past tiny's 636-token tail, so that the plan skips work), and small-fullkv on a
# synthetic state of 20,000 tokens (--synthetic-state, with --op-times), so that the benchmark cannot rot; then `hippo bench
# speculative` on it (whose greedy tokens with and without drafts must agree). Variables: HIPPO
# (the binary), TOKENIZER_DIR, WORK_DIR (removed and rewritten).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${HIPPO} model init --preset tiny --seed 1 --format plain --tokenizer ${TOKENIZER_DIR}
                        --out ${WORK_DIR}/tiny
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${HIPPO} bench model --model ${WORK_DIR}/tiny --contexts 64 --decode-steps 2
                        --repetitions 1 --threads 1 --plan-off-at 0
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${HIPPO} bench model --model ${WORK_DIR}/tiny --contexts 64,1000 --decode-steps 2
                        --repetitions 1 --threads 2 --chunk 256 --plan-off-at 1000 --json
                OUTPUT_VARIABLE report COMMAND_ERROR_IS_FATAL ANY)
message("${report}")
foreach(expected [["same_state":true]] [["n_tokens":1000]] [["decode_tokens_per_s":]] [["checkpoint_mapped_bytes":]])
  string(FIND "${report}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "bench model --json: ${expected} missing from the report")
  endif()
endforeach()
execute_process(COMMAND ${HIPPO} model init --preset small-fullkv --seed 1 --tokenizer ${TOKENIZER_DIR}
                        --out ${WORK_DIR}/small-fullkv
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${HIPPO} bench model --model ${WORK_DIR}/small-fullkv --contexts 20000 --decode-steps 2
                        --repetitions 1 --threads 2 --synthetic-state --op-times --json
                OUTPUT_VARIABLE report COMMAND_ERROR_IS_FATAL ANY)
message("${report}")
foreach(expected [["synthetic_state":true]] [["n_tokens":20000]] [["decode_tokens_per_s":]] [["decode_op_ms_per_token":{"linear":]]
                 [["indexer":]] [["outside_ops":]])
  string(FIND "${report}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "bench model --synthetic-state --json: ${expected} missing from the report")
  endif()
endforeach()
execute_process(COMMAND ${HIPPO} bench speculative --model ${WORK_DIR}/tiny --context 64 --steps 2 --repetitions 1
                        --generate 24 --threads 2 --json
                OUTPUT_VARIABLE report COMMAND_ERROR_IS_FATAL ANY)
message("${report}")
foreach(expected [["cost_ratio":]] [["break_even_acceptance":]] [["drafts":"all accepted"]] [["generated":24]])
  string(FIND "${report}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "bench speculative --json: ${expected} missing from the report")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
