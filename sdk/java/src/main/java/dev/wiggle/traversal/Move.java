package dev.wiggle.traversal;

import java.util.Map;

/**
 * Where a completed step sends its token.
 *
 * @param next the node the token moves to; null when it does not continue ({@code handback} is
 *     FILTERED or LOOP_LIMIT)
 * @param loopCounts each active loop's while predicate to the times it has been true; it
 *     travels with the token (an unmodifiable copy, never the caller's map)
 * @param handback null to keep going locally, else why not
 */
public record Move(String next, Map<String, Integer> loopCounts, Handback handback) {}
