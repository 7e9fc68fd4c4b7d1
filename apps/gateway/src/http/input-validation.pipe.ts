import { CairnError, formatIssuePath } from '@cairn/contracts';
import { Injectable } from '@nestjs/common';
import type { ArgumentMetadata, PipeTransform } from '@nestjs/common';

/**
 * Validates a parameter against the Standard Schema given in its decorator (`@Query({ schema })`,
 * Nest 12's native schema support) and refuses it with E_INPUT naming each field; parameters
 * without a schema pass untouched.
 */
@Injectable()
export class InputValidationPipe implements PipeTransform {
  async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const schema = metadata.schema;
    if (schema === undefined) return value;
    const result = await schema['~standard'].validate(value);
    if (result.issues === undefined) return result.value;
    const issues = result.issues.map((issue) => {
      const keys = (issue.path ?? []).map((segment) => (typeof segment === 'object' ? segment.key : segment));
      const named = metadata.data === undefined ? keys : [metadata.data, ...keys];
      return { path: named.length === 0 ? '' : formatIssuePath(named), message: issue.message };
    });
    const where = metadata.type === 'param' ? 'path parameter' : metadata.type;
    throw new CairnError('E_INPUT', `invalid ${where}: ${issues.map((i) => (i.path === '' ? i.message : `${i.path}: ${i.message}`)).join('; ')}`, {
      issues,
    });
  }
}
