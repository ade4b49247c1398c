"""Carry stored winners across a change of the source hash that changes no result (issue 14).

Up to commit 82eb236 a family's hash covered its files byte for byte; since, Python modules count by
their syntax tree (``source_graph.digest``), so reformatting them no longer voids winners. The
winners measured on 82eb236 are kept only where that is true of the code measured:

    python scripts/rehash_winners.py MEASURED_COMMIT [DB]   (DB: results/winners.sqlite)

MEASURED_COMMIT is the commit the winners were measured (or last carried) on. For each family, the
rows stored under the hash MEASURED_COMMIT's own code computes move to the current hash if every
source file has the same digest in both trees (same syntax trees, same device sources), or differs
only by reviewed changes (printed with the reasons; a reviewed file may be new): a file is reviewed
when every commit since MEASURED_COMMIT that touched it is in REVIEWED_COMMITS and it has no
uncommitted change, or, for winners measured on 82eb236, when REVIEWED names it. Otherwise nothing
moves and the family is reported.
"""

from __future__ import annotations

import ast
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from tunebox.families import get, names
from tunebox.source_graph import digest

REPO = Path(__file__).resolve().parents[1]
REVIEWED = {  # files that differ from 82eb236 in ways that change no result
    "tunebox/families/contract.py": "only the hash's computation, Family.identity and launch_options (run time)",
    "tunebox/families/gather/operation.py": "only draws and array_fields, read by lookups and launch options",
    "tunebox/families/scatter/operation.py": "only draws and array_fields, read by lookups and launch options",
    "tunebox/families/gather_elements/elements.py": "only render's return annotation and the import of its type",
    "tunebox/families/gather_elements/operation.py": "only draws and array_fields, read by lookups and launch options",
    "tunebox/families/gemm/operation.py": "parse refuses an alpha past float32's range (it became inf); the "
    "library's serving form (matmul into D) and array_fields added; tolerance and distance through products.py "
    "(the same formulas; alpha now scales the mean product before the constant, one rounding of atol)",
    "tunebox/families/gemm/tma_wgmma.py": "its TMA rules through common.tma_rules, shared with persistent: the "
    "same rules and messages for all 1,196,096 (problem, configuration) pairs of the gemm sweep files",
    "tunebox/families/gemm/common.py": "tma_rules added (moved from tma_wgmma.py, see there)",
    "tunebox/families/gemm/products.py": "new: the tolerance and distance formulas moved out of operation.py",
    "tunebox/families/gemm/__init__.py": "registers the template persistent (issue 20) after the three measured ones",
    "tunebox/families/gemm/persistent.py": "new template persistent, its own kernel: no stored winner uses it",
    "kernels/gemm/gemm_persistent.cu": "new: the persistent template's kernel, included by no other",
    "tunebox/families/tile_copy/operation.py": "the library's serving form (copy_) and array_fields added; "
    "kernel_view, which reshapes only degenerate problems (a unit-dimension transpose, whole rows narrower than 8) "
    "and none stored: all 2,047,894 valid vector / cp_async / tma configurations of the problems of "
    "tile_copy.toml, tile_copy_tma.toml and coverage_tile_copy.toml render identically (source, geometry, args)",
    "tunebox/families/tile_copy/tiles.py": "the templates render, lay out and bind the problem's kernel_view "
    "(the problem itself for every stored one; renders identical, see operation.py)",
    "tunebox/families/tile_copy/staged.py": "takes the kernel_view as tiles.py does (renders identical)",
    "tunebox/families/tile_copy/vector.py": "a one-row default for flat views (no stored problem is one)",
    "tunebox/families/tile_copy/__init__.py": "registers the template paired after the three measured ones",
    "tunebox/families/tile_copy/paired.py": "new template paired (2-byte transposes), its own kernel: no stored "
    "winner uses it",
    "kernels/tile_copy/tile_copy_paired.cu": "new: the paired template's kernel, included by no other",
    "kernels/include/tunebox/pairs.cuh": "new: included by tile_copy_paired.cu only",
    "tunebox/families/gather/baselines.py": "only the library's serving forms (index_select into out) added",
    "tunebox/families/windows/operation.py": "only array_fields, read for launch options",
    "kernels/gemm/gemm.cu": "mma, ldmatrix and wgmma wrappers moved to tunebox/mma.cuh: the instructions of 60 "
    "sampled variants (20 per template) are identical (scripts/sass_identity.py)",
    "kernels/include/tunebox/mma.cuh": "new: the wrappers moved out of gemm.cu, verbatim",
    "kernels/include/tunebox/tile.cuh": "only vector_fits added (moved from gather.cu), a template only gather "
    "and ragged3d instantiate: their 20 + 20 + 60 sampled variants' instructions are identical; the other "
    "families' code cannot change (gemm and gather_elements samples identical too)",
    "kernels/gather/gather.cu": "only vector_fits moved to tunebox/tile.cuh (instructions identical, 40 variants)",
    "kernels/ragged3d/ragged3d.cu": "its vector test is now tb::vector_fits (instructions identical, 60 variants)",
    "tunebox/families/base.py": "only Baseline.into, the serving form of a library call, added",
    "tunebox/cuda_api.py": "only the launch of arguments one by one, no longer reached, removed",
    "tunebox/families/kernel_args.py": "every kernel's struct rendered (all were named; 952 sources identical)",
    "tunebox/families/ragged3d/operation.py": "parse refuses over 2^24 sequences (it ran out of memory); draws",
    "tunebox/records.py": "only what a record holds (Status.SANITIZER_ERROR, the clock observations of a timing, "
    "Timing.clocks), read by no kernel, render, geometry or reference (issue 19 items 7 and 10)",
    "tunebox/limits.py": "only BF16_MEASURED_TFLOPS added, read by benchmarks (issue 20's share of the measured "
    "ceiling)",
}


REVIEWED_COMMITS = {  # commits whose every changed file changes no result
    "29977ac": "tile_copy: its distance (the lookup's nearest order, the race's) counts row alignment; no kernel, "
    "rule or rendered source changes",
    "de06d82": "tile_copy: a test and lookup.py's formatting only",
    "83fe502": "tile_copy: a comment in tile_copy_shifted.cu, a dict literal in shifted.py (renders the same source)",
    "5308ec0": "tile_copy: for_block_tiles and shift_words moved into copy_tiles.cuh; instructions identical "
    "(265 sampled variants; cp_async's, source untouched, vary from build to build)",
    "c7637c4": "rules.shared_memory_fits: the same condition and rule name in every template; only the message text",
    "53d2264": "BufferSpec.nbytes added (read by allocators only; the same byte counts they computed)",
    "5ae9d33": "tb::zero_fragments: instructions identical (gemm 80 of 80 sampled variants, quant_gemm 40 of 40)",
    "e61ea96": "quant_gemm tiled on tb::cp_async_ring: instructions identical (40 of 40 sampled variants)",
    "1c6293e": "template decode only (its TMA load, kernel gemm_decode.cu, decode.py): no carried winner uses it",
    "0f7ef47": "template decode only (ldmatrix for the tokens, its default) and two mma.cuh functions no other kernel "
    "calls: no carried winner uses the template",
    "fd9fe38": "template decode added after the measured ones (its own kernel, gemm_decode.cu; no stored winner "
    "uses it); gemm.cu's tile helpers moved into gemm_tiles.cuh and quant_gemm's reduction into split_sums.cuh "
    "(instructions identical: gemm 48 of 48, quant_gemm 40 of 40 sampled variants, scripts/sass_identity.py); new "
    "device-library functions used only by the new kernel (cp_async_ring, ldmatrix_x4_trans); the mma template's "
    "arguments through common.pointer_args (the same list)",
    "a8a42ec": "validity rules named (issue 14 item 7): violations equal on 5,698,834 (problem, configuration) "
    "pairs of every sweep problem and tma.violations on 50,000 requests, old against new",
    "c986e53": "split-K for template persistent: a parameter (absent from every carried persistent winner, which "
    "are dropped instead), its kernel path, and workspace only it binds; BufferSpec.zeroed (default off) and the "
    "allocators that honour it; no other template's source, geometry or arguments change",
    "b0c5d2c": "buffer_type moved into dtypes (the same function), read by allocators only",
    "4bd1fd6": "split-K's sums (SPLITS > 1 only): the machine code of 29 of the 30 unsplit grid winners is "
    "identical (scripts/sass_identity.py); the other one and the split winners are dropped, not carried",
    "c97bba6": "ragged3d's tma layout and maps moved verbatim into tma_layout.py",
    "04668f1": "one rule helper (rules.whole_elements) replaces three copies: same rule, message and order",
    "c532c11": "cp_async_zfill moved from quant_gemm.cu to async_copy.cuh: instructions identical (quant_gemm 40 of "
    "40, gemm 24 of 24 sampled variants); the other includers never instantiate it",
    "35d0c80": "tb::strided replaces five copies of the block-strided loop in tile_copy's kernels: the 5 tile_copy "
    "winners' instructions identical, gather's 10 sampled too; the other includers never instantiate it",
    "3d6bcb9": "gather_elements' torch baseline moved verbatim from operation.py to baselines.py",
    "90b1286": "gemm.cu's mma mainloop on tb::cp_async_ring: register naming and order only (8 of 8 sampled mma "
    "variants: same registers, instruction counts, opcodes and barriers); padded and wgmma identical",
    "08b5c8a": "ElementType.mean_magnitude (dtypes.py) and the gemm / quant_gemm tolerances on it: equal tolerances "
    "on the seeded inputs of the 30 stored gemm winners' problems checked; no kernel, rule or argument changed",
    "af425ec": "for gemm: the persistent kernel's named barriers moved, unchanged, into tunebox/barriers.cuh "
    "(instructions identical: gemm 48 of 48 sampled variants, persistent 12 of 12, scripts/sass_identity.py); its "
    "quant_gemm changes are the stream template's, whose winners were measured after it (3aeb934)",
    "b233e9c": "gemm persistent: the stages domain widened by 8, 10 and 12; every stored configuration (stages "
    "of the old values) renders, binds and launches as before",
    "c737b53": "quant_gemm: decode's and stream's warp-layout rules and power_ceiling moved into common.py; "
    "violations and renders equal on all 198,720 (problem, configuration) pairs of its sweep files, old against new",
    "975f649": "quant_gemm.cu: a comment reflowed and two lines wrapped; instructions identical (36 of 36 "
    "sampled variants)",
    "52112cd": "tb::Wgmma<192> added (used by no stored configuration) and the persistent template's BN domain "
    "widened by 192; other instructions identical (gemm 53 of 53, quant_gemm 27 of 27 sampled variants)",
    "f1debee": "hardware constants moved into limits.py (SM_COUNT from three modules, three more from "
    "quant_gemm/stream.py), the same values; no other line changes",
    "ea475c2": "template cluster added beside the others (persistent.py: cluster_shape (1, 1), the entry name and "
    "CLUSTER_M / CLUSTER_N members; the same maps, grid and rules for persistent configurations); instructions "
    "identical (gemm persistent 23, decode 24, wgmma 23, padded 13, mma 12; quant_gemm 24 sampled variants)",
    "eab369e": "the cluster template's remote release and grid only (cluster.cuh's mbarrier_arrive_cluster, called by "
    "gemm_persistent_cluster alone; limits.CLUSTERS_AT_ONCE, whose entry for one block is SM_COUNT); instructions "
    "identical since e63a2e8 (scripts/sass_identity.py --compare)",
    "e88bfec": "the persistent templates' tma_epilogue_chunks message names 'staged' beside 'direct'; no rule, "
    "render or argument changed",
    "edc9415": "ElementType.largest_magnitude added (dtypes.py) and windows' sum tolerance computed with it: equal "
    "tolerances on the seeded inputs of the 7 stored windows winners' problems and the serving grid's 6 windows "
    "shapes (diagnostics/windows_tolerance_identity.json); no kernel, rule or argument changed",
    "495c618": "epilogue 'staged' added to persistent_gemm.cuh (if constexpr, used by no stored configuration) and "
    "STAGED_EPILOGUE = false rendered for every other configuration (persistent, quant_gemm wgmma); instructions "
    "identical (gemm 140 of 140, quant_gemm 100 of 100 sampled variants; diagnostics/sass_staged_epilogue.json)",
    "975217c": "gemm_persistent.cu's comments and names only (block_tile reads the cluster shape from Cfg); "
    "instructions identical (cluster 23, persistent 23, wgmma 23, padded 13, mma 12, decode 12 sampled variants)",
    "b38e892": "tb::Wgmma's operand lists from one macro; instructions identical (persistent 18, cluster 18, wgmma 18, "
    "padded 10, mma 8, decode 8 sampled variants; quant_gemm uses no wgmma)",
    "78de5f7": "persistent split-K's final sums issue all loads first where they fit in registers: the same additions "
    "in the same order (sums bit-identical); instructions identical but for those split-K variants (persistent 33 and "
    "cluster 40 of 80 sampled identical, the 7 changed exactly the sampled ones of that form); no carried winner is "
    "of that form (the one that was, 128 x 4096 x 14336, re-timed at 78de5f7 by gemm_wide_splits)",
    "6a0ff7d": "quant_gemm decode's second_factor (branch, the form every stored winner ran, or predicated); "
    "stored decode configurations given second_factor = branch; instructions identical (decode 20, stream 20, "
    "tiled 20 sampled variants)",
    "b209d79": "persistent split-K's arrival on the tile counter one acquire-release atomic (tb::counter_arrive, new "
    "in barriers.cuh) in place of two __threadfence: instructions changed exactly in the split-K variants (sampled: 4 "
    "of 20 over every gemm recording, 23 of 40 over the split sweeps' recordings; every other template and 1-split "
    "variant identical); the one carried winner of that form (128 x 4096 x 14336, 2 splits) re-timed at b209d79 by "
    "gemm_wide_splits; quant_gemm includes barriers.cuh and does not call it (decode, stream, tiled 20 sampled each: "
    "identical)",
    "acc2113": "quant_gemm stream's second_factor (branch, the form every stored winner ran, or predicated); stored "
    "stream configurations given second_factor = branch; all 1001 recorded stream variants render the same source "
    "and geometry; decode's SECOND_PREDICATED the same expression, moved to common.py",
    "141b650": "Baseline.into's return annotation only (object for None): no code, render or reference changed",
    "3e87427": "a comment of barriers.cuh only (counter_arrive's contract)",
    "1b7914f": "tb::cp_async_or_elements for tile_copy's cp_async blocks and gemm's bounded tile loads: instructions "
    "identical for every form a carried winner has (tile_copy vector 60, tma 42, paired 36; gemm persistent 8, "
    "cluster 8, wgmma 28, padded 22, decode with TMA loads 14 sampled); changed only in the forms that use it (gemm "
    "mma: its one winner re-timed at 1b7914f; decode with cp.async loads and tile_copy cp_async: no winner); "
    "quant_gemm includes the header and does not call it (an uninstantiated template: no code)",
    "83a6069": "tile.cuh's store_slot_elements and segment_width, used by store_slot and store_pair_slot (tile_copy "
    "only): instructions identical (tile_copy vector 70, tma 46, paired 38, cp_async 52 sampled, the rest of cp_async "
    "varying from build to build as before); other families include the header and call neither (uninstantiated "
    "templates: no code)",
    "07f58da": "bf16x2::from_floats, quant.cu's bf16_pair moved into bf16x2.cuh: instructions identical (quant 60 of "
    "60 sampled variants, 5 of them nvfp4 to bfloat16, its one user)",
    "9362bce": "quant.cu's packed dequantize reformatted (lines, one namespace alias): instructions identical (quant "
    "60 of 60 sampled variants)",
    "ef7a09b": "quant_gemm only: quant.cuh's e2m1_encode and nvfp4_scale, which no quant_gemm kernel calls, "
    "rewritten; quant_gemm's instructions identical (179 of 179 sampled variants). quant itself was re-recorded, its "
    "rows not carried",
    "2f88cf7": "quant: an unused function removed, a comment rewrapped; instructions identical (88 of 88 sampled "
    "variants)",
    "402c1a1": "tile_copy: template windowed added after the measured ones (its own kernel and module; no stored "
    "winner uses it)",
    "9ff258b": "tile_copy: template windowed only (its kernel and module)",
    "2af6876": "tile_copy: a comment in the windowed kernel",
    "67f5250": "tile_copy: template windowed only, and tiles.py's tile counts and arguments take a reach: 0 for every "
    "other template (the same counts, geometry and arguments)",
    "7c644cc": "tile_copy: template windowed only (its kernel and module)",
    "328e589": "fp4.cuh's decode_word (e2m1_spread) and e8m0_small_factor, which quant does not call: quant's "
    "instructions identical (39 of 39 sampled variants); quant_gemm, which calls them, re-recorded at e8ac542",
    "a1f76ec": "tile_copy: template narrow only (its kernel, module and sweep file); tiles.py's copy_args composed of "
    "operand_args and pad_arg, the same members in the same order",
    "f3a4f68": "tile_copy: narrow.py's render annotates its members' type (no value changes)",
    "557f55b": "tile_copy: narrow.py's geometry asserts against MAX_GRID_X (the same value, 2^31 - 1)",
    "2e53bf7": "gemm: the persistent kernel's body moved to tunebox/persistent_gemm.cuh behind a weights policy, "
    "Wgmma takes B's transpose flag, gemm/common.py's tma_rules typed by a protocol: instructions identical (48 "
    "sampled variants of persistent, cluster, wgmma, padded; results/diagnostics/sass_gemm_persistent_header.json); "
    "quant_gemm: template wgmma added (its own kernel, no stored winner uses it) and fp4.cuh's decode_word_in_order, "
    "which no other kernel calls: decode, stream and tiled instructions identical (36 variants), quant's too (20; "
    "results/diagnostics/sass_gemm_persistent_header.json)",
    "bb60d25": "persistent_gemm.cuh: the converting policy's scales read ahead (code gemm's policy does not "
    "instantiate); quant_gemm's wgmma kernel and module only",
    "4adcec8": "persistent_gemm.cuh: converted operands in their own ring, every addition under W::CONVERTS or "
    "sized by W::OPERANDS (0 for gemm): gemm's instructions identical (the same 48 variants); wgmma's module only",
    "b2e3e25": "gemm/persistent.py's warpgroup rules moved into warpgroup_rules (the same rules, order and messages), "
    "which quant_gemm's wgmma module calls",
    "d3d99de": "quant_gemm: comments reflowed in quant_gemm_wgmma.cu and bulk.cuh, the wgmma entry's Params named: "
    "instructions identical (48 variants, 12 of them wgmma's)",
    "705b7df": "persistent_gemm.cuh and the wgmma kernel: W::convert's unread parameters dropped: instructions "
    "identical (48 quant_gemm variants, 16 gemm)",
    "51b2e2a": "bulk.cuh's bulk_prefetch_l2, which only quant_gemm's wgmma kernel calls (decode, stream, tiled "
    "instructions identical, 36 variants); the wgmma kernel and module",
    "6088e55": "persistent_gemm.cuh's W::CONVERTS became W::CONVERSION and the consumers' conversion was added, "
    "wgmma's new field converters (recordings and winners migrated with 'producer', the form they ran): "
    "instructions identical (gemm 24 sampled variants, quant_gemm 32, wgmma's 8 among them, "
    "diagnostics/sass_wgmma_consumers.json); the new rules refuse only configurations with the new values",
    "9f35695": "the consumers' conversion moved before their wait (converters = consumers only, which no stored "
    "winner uses); its rule: the same identity check ran on this tree",
    "9d7fa54": "ConsumerConversion takes STAGE and A_BYTES as template arguments: instructions identical (gemm 24, "
    "quant_gemm 32 sampled variants, and 10 consumers-mode wgmma variants of diagnostics/wgmma_s28b/c)",
    "c52a2f5": "the literal 65536 named limits.SM_REGISTERS in gemm, tile_copy and quant_gemm: every stored gemm, "
    "quant_gemm and tile_copy winner renders the same source, geometry and arguments (98 of 98); limits.py, which "
    "every family imports, only gained the constant",
    "1c56048": "gemm/split_k.py: one rule message reworded (no outcome changes)",
    "ca49a37": "quant_gemm wgmma's converters 'decoders' (its own warpgroup; no stored winner uses it) and the "
    "producer decoders' loop moved into persistent_gemm.cuh's convert_steps: gemm 24, quant_gemm 32 and 10 "
    "consumers-mode variants instruction-identical (results/diagnostics/sass_wgmma_decoders.json)",
    "1e25046": "gemm: split-K's rules, slots and workspace moved to gemm/split_k.py (the same outcomes; one "
    "message reworded); quant_gemm: wgmma gains splits and the workspace it reads: every stored gemm and quant_gemm "
    "winner (splits = 1 added by migrate_recording.py) renders the same source, geometry and arguments (49 of 49)",
    "c1b8ca2": "tile_copy: template windowed only (its kernel and module: sector-aligned windows); its four stored "
    "winners were dropped after the carry and re-recorded (spaces/tile_copy_windowed.toml)",
    "d1c2dd0": "quant_gemm's template registers added after the others (its own kernel, quant_gemm_registers.cu; no "
    "stored winner uses it) and tb::WgmmaRs in mma.cuh: instructions identical (gemm 72 of 72, quant_gemm 48 of 48 "
    "sampled variants, diagnostics/sass_registers_template.json)",
    "b97bbb8": "quant_gemm template registers' kernel only (split-K's batched sums): no stored winner uses it",
    "afe1553": "quant_gemm template registers' kernel and rules only (BW 256); its five stored winners are dropped "
    "after the carry and re-recorded (spaces/quant_gemm_registers.toml)",
    "d7c7646": "fp4::output_scale moved into fp4.cuh and quant_gemm's TMA templates' arguments and K rule into "
    "common.py: instructions identical (quant_gemm 60 of 60 sampled variants, quant 12 of 12, "
    "diagnostics/sass_output_scale.json); split_rules skips its epilogue rule only when given None (template "
    "registers; every other caller passes a bool); Format.check_storage: from_arrays only (run time)",
    "12d714d": "quant_gemm registers: rule consumer_tokens widened (BW 256 with BT 8; no stored configuration is one) "
    "and a comment of its kernel: every stored configuration stays valid and its instructions cannot change",
    "9dc23b9": "quant_gemm template registers' kernel and module (a step's scale codes in one load, NVFP4's NaN "
    "codes as a second multiply) and fp4.cuh's e4m3_nan / e4m3_finite_factor (e4m3_factor written on them): "
    "instructions identical for every other template (decode, stream, tiled, wgmma 18 sampled each) and quant (23), "
    "diagnostics/sass_scale_loads.json; registers' stored winners are dropped after the carry and re-recorded "
    "(spaces/quant_gemm_registers.toml)",
    "1f7901f": "quant_gemm template registers' kernel (its one-factor decode path) and fp4.cuh's e8m0_any_big / "
    "e4m3_any_nan, which only that kernel calls: instructions identical for every other template and quant "
    "(diagnostics/sass_scale_loads.json); no registers winner is stored (dropped at 31150f5, re-recorded next)",
    "63c8a15": "quant_gemm template registers' kernel only (unsplit D through shared scratch, reverted by the "
    "next commit but one); mma.cuh's and registers.py's changes reverted too (their digests are bd9c525's)",
    "38755d9": "quant_gemm template registers' kernel only (split-K's whole parts by vectors); its winners are "
    "dropped after the carry and re-recorded (spaces/quant_gemm_registers.toml)",
    "0529899": "quant_gemm template registers' kernel only (63c8a15's unsplit path reverted: unsplit variants' "
    "instructions bd9c525's, nvdisasm of four)",
    "de45459": "gemm: template padded_persistent added after the others (the persistent kernel on pad_rows copies; no "
    "stored winner uses it), persistent.py's hooks (alignment_rule, operand_source, helper_members) giving the same "
    "rules, maps and renders for template persistent and cluster (quant_gemm imports only persistent.py's constants "
    "and warpgroup_rules, unchanged), pad_rows moved into pad_rows.cuh and padded's "
    "prologue into padding.py: instructions identical (68 of 68 sampled variants, "
    "diagnostics/sass_padded_persistent.json)",
    "d4d79e5": "gemm: pad_rows rewritten (template padded's helper kernel; its two stored winners are dropped after "
    "the carry and re-recorded by spaces/gemm_ragged.toml) and comments: every other template's instructions identical "
    "(60 of 60, diagnostics/sass_padded_persistent.json)",
    "ff7d822": "gemm: pad_rows over the whole grid (template padded's and padded_persistent's helper) and rule "
    "pad_chunks_32bit, reverted by 4ea605a",
    "4ea605a": "gemm: the revert of ff7d822 (pad_rows.cuh, padding.py, padded.py, padded_persistent.py as at d4d79e5)",
    "9b18d89": "gemm: pad_rows over the whole grid, a chunk a thread; rule pad_chunks_32bit (no stored problem is near "
    "it): every template but padded instruction-identical (60 of 60, diagnostics/sass_padded_persistent.json); the "
    "padded templates' winners re-recorded (spaces/gemm_ragged.toml) before the carry",
    "a779e9d": "gemm: a comment of pad_rows.cuh only",
    "25774b1": "gemm: the padded templates' hooks moved into padding.PaddedOperands (Python only): 58,800 pairs of the "
    "gemm sweep files' problems render, bind and break rules identically (scripts/render_identity.py)",
    "236b7b5": "split_k.counter_tiles (the same formula, now shared by split_buffers and quant_gemm registers' rule); "
    "registers' default chooses its ring by shared memory alone: the same defaults on 200 problems, no rule changed",
    "525c7e1": "parse_padding moved to dtypes.py (from indexed.py and tile_copy's copy of it) and refusing a pad_value "
    "beyond the problem's type: every stored winner's and sweep file's problem parses identically (491 of 491); no "
    "kernel, render, geometry or argument changed",
    "d98087e": "Family.source_files lists the device sources, then the modules, each in path order (the order a "
    "checkout's sorted paths had; an installed package's differed): only the order the hash reads, no result",
    "dfb51b6": "gemm.common.pipeline_stages: only its doc= text (shown by tunebox families); no rule, render or value",
    "f524681": "records.py: EvalRecord.from_json and Timing.from_dict refuse records no sweep writes (read-side "
    "validation; all 37,365 records of the committed logs and recordings read the same); no kernel, rule or render",
    "007fa04": "records.py: check_samples, the same read-side check of f524681 shared with winner_row; no kernel, rule "
    "or render",
    "1f009de": "records.py: DeviceInfo.describe added (messages and reports); no kernel, rule or render",
}


def git(*args: str) -> list[str]:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()


def reviewed(measured: str) -> dict[str, str]:
    """The files changed since ``measured`` whose every change is reviewed, with the reasons."""
    if git("rev-parse", measured) == git("rev-parse", "82eb236"):
        return dict(REVIEWED)
    reasons = {git("rev-parse", commit)[0]: f"{commit}: {reason}" for commit, reason in REVIEWED_COMMITS.items()}
    dirty = set(git("diff", "--name-only", "HEAD"))
    found = {}
    for path in git("diff", "--name-only", measured, "HEAD"):
        commits = git("log", "--format=%H", f"{measured}..HEAD", "--", path)
        if path not in dirty and commits and all(c in reasons for c in commits):
            found[path] = "; ".join(reasons[c] for c in commits)
    return found


def measured_hashes(measured: Path) -> dict[str, str]:
    """Each family's hash as the measured tree's own code computed it."""
    code = "from tunebox.families import get, names; print({n: get(n).source_hash() for n in names()})"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=measured,
        env={**os.environ, "PYTHONPATH": str(measured)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(ast.literal_eval(out))


def main(commit: str, db: Path) -> None:
    imported = Path(sys.modules["tunebox"].__file__ or "").resolve().parent
    if imported != REPO / "tunebox":  # an installed copy would hash its own files, and carry nothing
        sys.exit(f"tunebox is imported from {imported}, not this checkout: run with PYTHONPATH={REPO}")
    with tempfile.TemporaryDirectory() as tree:
        archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        carry(Path(tree), reviewed(commit), db)


def carry(measured: Path, known: dict[str, str], db: Path) -> None:
    """Move the rows of each family whose sources differ from ``measured``'s by ``known`` files only."""
    old_hashes = measured_hashes(measured)
    connection = sqlite3.connect(db)
    with connection:
        for name in names():
            current = list(get(name).source_files)
            old = [measured / path.relative_to(REPO) for path in current]
            added = {str(b.relative_to(REPO)) for a, b in zip(old, current, strict=True) if not a.is_file()}
            if name not in old_hashes or added - set(known):
                print(f"{name}: the measured tree lacks the family or some of today's sources; left alone")
                continue
            differing = added | {
                str(b.relative_to(REPO))
                for a, b in zip(old, current, strict=True)
                if a.is_file() and digest(a) != digest(b)
            }
            if differing - set(known):
                print(f"{name}: {sorted(differing - set(known))} differ from the measured code; left alone")
                continue
            for path in sorted(differing):
                print(f"{name}: {path} differs, reviewed: {known[path]}")
            new_hash = get(name).source_hash()
            moved = connection.execute(
                "UPDATE winners SET family_hash = ? WHERE family = ? AND family_hash = ?",
                (new_hash, name, old_hashes[name]),
            ).rowcount
            print(f"{name}: {moved} winners {old_hashes[name]} -> {new_hash}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]) if len(sys.argv) > 2 else REPO / "results" / "winners.sqlite")
