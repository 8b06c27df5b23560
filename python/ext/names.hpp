// The strings Python uses for the library's enums ('swa', 'ring', 'vec', ...), parsed with a
// clear error that lists the accepted values.
#pragma once

#include <string>

#include "ladder/engine.hpp"
#include "ladder/geometry.hpp"
#include "ladder/ladder.hpp"
#include "ladder/plane.hpp"

namespace ladder::py {

LayerClass parse_layer_class(const std::string& s);
PlaneKind parse_plane_kind(const std::string& s);
// 'auto' is not a Route: callers that accept it check for it first.
Route parse_route(const std::string& s);
LayerClass class_of(PlaneKind k);

}  // namespace ladder::py
