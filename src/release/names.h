/*
 * names.h — the one table that maps release tensor names to engine names, and engine names
 * to the tensor groups `clef inspect` reports (embeddings, GDN, attention, ...).
 *
 *   model.language_model.X | language_model.X   -> text.X
 *   model.visual.X | visual.X                    -> vision.X
 *   lm_head.weight                               -> lm_head.weight
 *   X in joint_head.safetensors                  -> head.X
 *   mtp.*                                        -> ignored (multi-token prediction, unused)
 * Anything else in a model shard is unknown: it keeps its stored name.
 */
#ifndef CLEF_RELEASE_NAMES_H
#define CLEF_RELEASE_NAMES_H

#include "clef_release.h"

typedef enum clef_name_kind {
    CLEF_NAME_MODEL,    /* text.*, vision.*, lm_head.weight */
    CLEF_NAME_HEAD,     /* head.* */
    CLEF_NAME_IGNORED,  /* mtp.*: counted, never loaded */
    CLEF_NAME_UNKNOWN,  /* no known prefix */
} clef_name_kind;

/* Map a stored name. in_head_file: the tensor comes from joint_head.safetensors. *engine is a
 * malloc'd engine name (the stored name for UNKNOWN/IGNORED); NULL on out of memory. */
clef_name_kind clef_name_to_engine(const char *stored, int in_head_file, char **engine);

/* Tensor groups (clef_tensor_group_of, clef_tensor_group_name) are public: clef_release.h. */

#endif /* CLEF_RELEASE_NAMES_H */
