// What llama.cpp makes of a line of speculative-decoding flags: the flags are parsed by llama.cpp's own argument
// parser (common_params_parse, common/arg.cpp, as llama-server parses them) and the result printed as one JSON
// object: the speculation types, the draft-model settings, the ngram-simple settings, and the number of tokens the
// configured implementations draft per step (common_speculative_n_max, common/speculative.cpp). Built from the
// llama.cpp source that llama-cpp-python's source package vendors (scripts/build_llama_harness.sh); used by the
// conformance tests of the llama.cpp export (tests/test_engines_llama_cpp.py). Exit code 2: the parser refused.
#include "arg.h"
#include "common.h"
#include "speculative.h"

#include <cstdio>
#include <string>

int main(int argc, char ** argv) {
    common_params params;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_SERVER)) {
        return 2;
    }
    const auto & spec = params.speculative;
    std::string types;
    for (size_t i = 0; i < spec.types.size(); i++) {
        types += (i ? ", \"" : "\"") + common_speculative_type_to_str(spec.types[i]) + "\"";
    }
    printf("{\"types\": [%s], \"draft_model\": \"%s\", \"n_max\": %d, \"n_min\": %d, \"p_min\": %.9g, "
           "\"p_split\": %.9g, \"ngram_simple\": {\"size_n\": %d, \"size_m\": %d, \"min_hits\": %d}, "
           "\"drafted_per_step\": %d}\n",
           types.c_str(), spec.draft.mparams.path.c_str(), spec.draft.n_max, spec.draft.n_min, spec.draft.p_min,
           spec.draft.p_split, (int) spec.ngram_simple.size_n, (int) spec.ngram_simple.size_m,
           (int) spec.ngram_simple.min_hits, common_speculative_n_max(&spec));
    return 0;
}
