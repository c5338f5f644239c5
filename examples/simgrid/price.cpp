// The advisor's price for each simulated collective, from the advisor's own
// code (advisor/model/comm_model.hpp): reads run.sh's sim.csv on stdin, writes
// it back with the advisor's times on stdout.
//
//   price PROFILE < sim.csv > compare.csv
//
// Each row's group geometry is the advisor's: `ranks` members `groups` apart
// among nodes × gpus_per_node ranks (contiguous: groups = 1), priced with
// axis_link + collective_time as predict prices an axis. Where only some of the
// groups run (active < groups) the advisor has no idle neighbours to leave
// out: such a row is priced as one spanning group alone on its nodes,
// inter_link(c = active, g, m) with the geometry's m.
//
// Columns added: advisor_s (the price), simple_s (the same link without its
// LL protocol: call + α·steps + f·bytes/busbw), protocol (which of the two the
// price took), c and m (the advisor's groups_per_node and members_per_node),
// alpha_us, ll_alpha_us, call_us, busbw_GBps (the link as priced, after sharing).
#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "advisor/core/collective.hpp"
#include "advisor/core/machine_profile.hpp"
#include "advisor/model/comm_model.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PROFILE < sim.csv > compare.csv\n", argv[0]);
    return 2;
  }
  try {
    const ff::MachineProfile p = ff::load_machine(argv[1]);
    std::string line;
    std::getline(std::cin, line);  // header
    std::printf("%s,advisor_s,simple_s,protocol,c,m,alpha_us,ll_alpha_us,call_us,busbw_GBps,ratio_sim_over_advisor\n",
                line.c_str());
    while (std::getline(std::cin, line)) {
      if (line.empty()) continue;
      std::stringstream ss(line);
      std::vector<std::string> f;
      for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
      if (f.size() < 7) throw std::runtime_error("short row: " + line);
      const std::string& coll = f[0];
      const int g = std::stoi(f[1]);
      const long long nodes = std::stoll(f[2]);
      const int groups = std::stoi(f[3]), active = std::stoi(f[4]);
      const double bytes = std::stod(f[5]), sim = std::stod(f[6]);
      const ff::Coll c = coll == "all-gather" ? ff::Coll::AllGather : ff::Coll::ReduceScatter;
      const long long world = nodes * p.gpus_per_node;

      // The advisor's geometry of this axis: groups of g ranks `groups` apart.
      const ff::GroupGeometry geo = ff::group_geometry(world, p.gpus_per_node, groups, g);
      ff::LinkParams link;
      if (active == groups) {
        const ff::AxisLink al = ff::axis_link(p, world, groups, g);
        if (al.inside) throw std::runtime_error("a group inside a node: not what this compares");
        link = al.inter;
      } else {
        link = ff::inter_link(p, active, g, geo.members_per_node);
      }
      const double advisor =
          active == groups ? ff::collective_time(c, bytes, ff::axis_link(p, world, groups, g))
                           : ff::collective_time(c, g, bytes, link);
      ff::LinkParams simple = link;
      simple.ll_alpha_s = 0;
      const double simple_t = ff::collective_time(c, g, bytes, simple);
      const char* protocol = advisor < simple_t ? "LL" : "Simple";
      std::printf("%s,%.9e,%.9e,%s,%d,%d,%.3f,%.3f,%.3f,%.3f,%.4f\n", line.c_str(), advisor, simple_t, protocol,
                  active == groups ? geo.groups_per_node : active, geo.members_per_node, link.alpha_s * 1e6,
                  link.ll_alpha_s * 1e6, link.call_s * 1e6, link.busbw / 1e9, sim / advisor);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "price: %s\n", e.what());
    return 1;
  }
  return 0;
}
