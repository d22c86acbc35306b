/* strata -- library version and plugin ABI version. */
#ifndef STRATA_VERSION_H
#define STRATA_VERSION_H

#define STRATA_VERSION_MAJOR 0
#define STRATA_VERSION_MINOR 1
#define STRATA_VERSION_PATCH 0
#define STRATA_VERSION_STRING "0.1.0"

/* Plugin ABI. The major is part of the entry symbol (strata_plugin_v2) and
 * must match exactly; the minor grows when members are appended to a frozen
 * struct, and the core accepts any minor (it guards newer members by
 * struct_size, see STRATA_HAS). */
#define STRATA_ABI_MAJOR 2
#define STRATA_ABI_MINOR 13

/* Build signature: compile-time facts that change ABI-visible layouts
 * (cf. nginx's NGX_MODULE_SIGNATURE). A plugin whose signature differs from
 * the core's is refused as "not binary compatible". */
#define STRATA_SIG_PTR_(n) #n
#define STRATA_SIG_PTR(n) STRATA_SIG_PTR_(n)
#define STRATA_BUILD_SIG "ptr" STRATA_SIG_PTR(__SIZEOF_POINTER__) "-f32-le"

#endif /* STRATA_VERSION_H */
