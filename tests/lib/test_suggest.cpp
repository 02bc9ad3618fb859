#include <catch2/catch.hpp>

#include "lib/suggest.hpp"

using namespace roundscope;

TEST_CASE("edit_distance counts insertions, deletions, substitutions and swaps, ignoring case", "[suggest]") {
    CHECK(edit_distance("", "") == 0);
    CHECK(edit_distance("e4m3", "E4M3") == 0);
    CHECK(edit_distance("kitten", "sitting") == 3);
    CHECK(edit_distance("fa3-fp9", "fa3-fp8") == 1);
    CHECK(edit_distance("abc", "") == 3);
    CHECK(edit_distance("", "abc") == 3);
    CHECK(edit_distance("cdua", "cuda") == 1);  // a swap of neighbours
    CHECK(edit_distance("ab", "ba") == 1);
    CHECK(edit_distance("ca", "abc") == 3);  // no edit of a swapped pair again (the OSA distance)
    CHECK(edit_distance("fish", "bash") == 2);
}

TEST_CASE("closest_name suggests a name at most two edits away and within half its length", "[suggest]") {
    const std::vector<std::string> known = {"rne", "rna", "rtz", "up", "down"};
    CHECK(closest_name("rnee", known) == "rne");
    CHECK(closest_name("RNA", known) == "rna");  // case alone: still suggested
    CHECK(closest_name("dwn", known) == "down");
    CHECK(closest_name("nearest", known).empty());         // far from every name
    CHECK(closest_name("x", known).empty());               // "up" is two edits away, its whole length
    CHECK(closest_name("fish", {"bash", "zsh"}).empty());  // two edits of four letters: no
    CHECK(closest_name("mxfp44", {"mxfp4", "nvfp4"}) == "mxfp4");
    CHECK(closest_name("rnx", known) == "rne");  // a tie goes to the earlier name
    CHECK(did_you_mean("dwn", known) == "; did you mean 'down'?");
    CHECK(did_you_mean("zzzzzz", known).empty());
}
