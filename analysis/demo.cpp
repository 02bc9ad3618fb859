#include "analysis/demo.hpp"

#include "analysis/synthetic_attention.hpp"

namespace roundscope::analysis {

DemoReport run_demo(int threads) {
    DemoReport r;
    {
        SyntheticSpec spec;
        spec.scenario = Scenario::sink, spec.n = 1024, spec.d = 64, spec.sink_strength = 8;
        PCollapseOptions o;
        o.recipe = emu::find_recipe("fp8-forward-order");
        o.sink_strength = spec.sink_strength, o.threads = threads;
        r.pcollapse = pcollapse(synthetic_attention(spec), o);
    }
    {
        SyntheticSpec spec;
        spec.scenario = Scenario::repeated_max, spec.n = 512, spec.d = 64, spec.heads = 2, spec.d_model = 256;
        const emu::AttentionInputs in = synthetic_attention(spec);
        for (const char* name : {"fa2-bf16", "fa2-bf16-o-bf16", "fa2-bf16-torch"}) {
            for (const bool adjust : {false, true}) {
                BiasOptions o;
                o.recipe = emu::find_recipe(name);
                if (adjust) o.recipe.max_adjust = true, o.recipe.name += " with max adjustment";
                o.threads = threads;
                r.bias.push_back(rounding_bias(in, o));
            }
        }
        double running = 0;
        for (std::uint64_t step = 0; step < 8; ++step) {
            spec.seed = step;
            BiasOptions o;
            o.recipe = emu::find_recipe("fa2-bf16-o-bf16");
            o.threads = threads;
            const BiasResult b = rounding_bias(synthetic_attention(spec), o);
            running += b.coefficient_sum;
            r.bias_cumulative.push_back(running);
            r.bias_query_weight.add(*b.query_weight, "demo step");
        }
    }
    {
        SyntheticSpec spec;
        spec.n = 128, spec.d = 64;
        const emu::AttentionInputs in = synthetic_attention(spec);
        LeakOptions o;
        o.recipe = emu::find_recipe("mxfp4-v");
        o.threads = threads;
        r.leak = leak(in, o);
        o.fix = true;
        r.leak_fixed = leak(in, o);
    }
    {
        SyntheticSpec spec;
        spec.scenario = Scenario::wide, spec.n = 256, spec.d = 64, spec.spread = 1.8;
        HeadroomOptions o;
        o.threads = threads;
        r.headroom = headroom(synthetic_attention(spec), o);
    }
    return r;
}

}  // namespace roundscope::analysis
